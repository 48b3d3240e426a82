package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestHeartbeatCodeSetKeptAsSent: Java clients send codeSet as numbers,
// the official Go client as numeric strings; both decode, and a
// subscription re-encodes with the codes as they came.
func TestHeartbeatCodeSetKeptAsSent(t *testing.T) {
	for _, codes := range []string{`[2598919]`, `["2598919"]`, `[]`} {
		body := `{"clientID":"c@1","producerDataSet":[],"consumerDataSet":[{"groupName":"G","consumeType":"CONSUME_PASSIVELY",` +
			`"messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{"classFilterMode":false,` +
			`"topic":"T","subString":"TagA","tagsSet":["TagA"],"codeSet":` + codes + `,"subVersion":1,"expressionType":"TAG"}],"unitMode":false}]}`
		var hb HeartbeatData
		if err := json.Unmarshal([]byte(body), &hb); err != nil {
			t.Fatalf("codeSet %s: %v", codes, err)
		}
		sd := hb.ConsumerDataSet[0].SubscriptionDataSet[0]
		if !sd.MatchesTag("TagA") || sd.MatchesTag("TagB") {
			t.Fatalf("codeSet %s: tags %v", codes, sd.TagsSet)
		}
		if got := string(sd.JSON()); !strings.Contains(got, `"codeSet":`+codes) {
			t.Fatalf("codeSet %s re-encoded as %s", codes, got)
		}
	}
}
