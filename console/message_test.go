package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/client"
)

// A lookup answers up to 32 messages per broker group, and JSON writes a
// body byte such as '<' as six: shown whole, bodies of a few MiB made
// answers of hundreds of MiB, built in memory twice (encode, indent).
// Bodies are clipped to maxLookupBody on a rune boundary, bodySize still
// the whole size.
func TestLookupBodyClipped(t *testing.T) {
	for _, tc := range []struct {
		name, encoding string
		body           []byte
	}{
		{"markup", "text", bytes.Repeat([]byte("<"), 1<<20)},
		{"runes", "text", append([]byte("x"), bytes.Repeat([]byte("é"), 1<<19)...)},
		{"binary", "base64", bytes.Repeat([]byte{0xff}, 1<<20)},
	} {
		rec := httptest.NewRecorder()
		writeJSON(rec, http.StatusOK, MessagesView{Messages: []MessageView{viewOf(&client.MessageExt{Message: client.Message{Topic: "T", Body: tc.body}})}})
		if rec.Body.Len() > 8*maxLookupBody {
			t.Errorf("%s: a %d-byte body made a %d-byte answer", tc.name, len(tc.body), rec.Body.Len())
			continue
		}
		var v MessagesView
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		m := v.Messages[0]
		shown := []byte(m.Body)
		if m.BodyEncoding == "base64" {
			shown = []byte(decodeBase64(t, m.Body))
		}
		if m.BodyEncoding != tc.encoding || !m.BodyTruncated || m.BodySize != len(tc.body) ||
			len(shown) > maxLookupBody || len(shown) < maxLookupBody-3 || !bytes.HasPrefix(tc.body, shown) {
			t.Errorf("%s: %s body of %d bytes shown (truncated %v, bodySize %d), want a %s prefix of at most %d bytes",
				tc.name, m.BodyEncoding, len(shown), m.BodyTruncated, m.BodySize, tc.encoding, maxLookupBody)
		}
	}
	v := viewOf(&client.MessageExt{Message: client.Message{Topic: "T", Body: []byte("hello")}})
	if v.Body != "hello" || v.BodyTruncated || v.BodySize != 5 || strings.Contains(v.BodyEncoding, "64") {
		t.Errorf("short body: %+v", v)
	}
}

func decodeBase64(t *testing.T, s string) string {
	t.Helper()
	var b []byte
	if err := json.Unmarshal([]byte(`"`+s+`"`), &b); err != nil {
		t.Fatal(err)
	}
	return string(b)
}
