package console

import (
	"strings"
	"testing"
)

// FuzzDecodeAction feeds arbitrary bodies to the action decoder: it must
// never panic, and what it accepts is one object of known fields within
// the size bound.
func FuzzDecodeAction(f *testing.F) {
	for _, s := range []string{`{"brokerName":"broker-a"}`, `{"brokerName":"b","targetId":"n1"}`, `{"cluster":"c","dryRun":true}`,
		`{}`, `{"x":1}`, `[]`, `{"brokerName":1}`, `{"brokerName":"a"}{"brokerName":"b"}`, `{"brokerName":"` + strings.Repeat("a", 5000) + `"}`, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var tr TransferRequest
		if err := decodeAction(strings.NewReader(body), &tr); err == nil && len(body) > maxActionBody {
			t.Fatalf("accepted a %d-byte body", len(body))
		}
		var br BalanceRequest
		_ = decodeAction(strings.NewReader(body), &br)
	})
}

// TestDecodeAction pins what the decoder refuses.
func TestDecodeAction(t *testing.T) {
	for body, ok := range map[string]bool{
		`{"brokerName":"broker-a","targetId":"n1"}`:                   true,
		`{"brokerName":"broker-a"} `:                                  true,
		`{"brokerName":"broker-a","extra":1}`:                         false,
		`{"brokerName":"a"}{"brokerName":"b"}`:                        false,
		`not json`:                                                    false,
		`{"brokerName":"` + strings.Repeat("a", maxActionBody) + `"}`: false,
	} {
		var tr TransferRequest
		if err := decodeAction(strings.NewReader(body), &tr); (err == nil) != ok {
			t.Errorf("%.60s: err=%v, want ok=%v", body, err, ok)
		}
	}
}
