package wire

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestQuoteObjectKeys(t *testing.T) {
	in := `{"a":{{"topic":"T","brokerName":"b","queueId":0}:{"x":1},{"topic":"T}","brokerName":"b","queueId":1}:{"x":2}},"s":"{not a key}","l":[{"k":{}}]}`
	out, err := QuoteObjectKeys([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		A map[string]struct{ X int } `json:"a"`
		S string                     `json:"s"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(v.A) != 2 || v.S != "{not a key}" {
		t.Fatalf("%+v", v)
	}
	for k, x := range v.A {
		mq, err := ParseQueueKey(k)
		if err != nil || mq.Topic[0] != 'T' || int(mq.QueueID)+1 != x.X {
			t.Fatalf("key %q: %+v %v", k, mq, err)
		}
	}
	plain := `{"a":{"k":[1,2,{"b":"c"}]}}`
	if out, err := QuoteObjectKeys([]byte(plain)); err != nil || string(out) != plain {
		t.Fatalf("plain JSON changed: %s %v", out, err)
	}
	for _, bad := range []string{`{"a":"x`, `{"a":{{"b":1}`, `}`} {
		if _, err := QuoteObjectKeys([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestConsumerRunningInfoRoundTrip(t *testing.T) {
	pq, _ := json.Marshal(ProcessQueueInfo{CommitOffset: 7, Locked: true})
	ri := &ConsumerRunningInfo{
		Properties:      map[string]string{PropConsumeType: "CONSUME_PASSIVELY"},
		SubscriptionSet: []SubscriptionData{{Topic: "T", SubString: "*"}},
		MqTable:         []QueueEntry{{Queue: MessageQueue{Topic: "T", BrokerName: "b", QueueID: 3}, Value: pq}},
		StatusTable:     map[string]ConsumeStatus{"T": {PullTPS: 1.5}},
	}
	got, err := DecodeConsumerRunningInfo(EncodeConsumerRunningInfo(ri))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Properties, ri.Properties) || got.SubscriptionSet[0].Topic != "T" || len(got.MqTable) != 1 ||
		got.MqTable[0].Queue != ri.MqTable[0].Queue || string(got.MqTable[0].Value) != string(pq) || got.StatusTable["T"].PullTPS != 1.5 {
		t.Fatalf("round trip: %+v", got)
	}
}

func FuzzQuoteObjectKeys(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{{"topic":"T"}:{"x":1}}`, `{"a":{{"q":"\"}"}:[1]}}`, `[{"a":{{}:{}}}]`, `"\\`, `{{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := QuoteObjectKeys(b)
		if err != nil {
			return
		}
		// Valid JSON stays valid and unchanged.
		if json.Valid(b) && string(out) != string(b) {
			t.Fatalf("valid JSON changed: %q → %q", b, out)
		}
	})
}

func FuzzDecodeConsumerRunningInfo(f *testing.F) {
	f.Add(EncodeConsumerRunningInfo(&ConsumerRunningInfo{Properties: map[string]string{"a": "b"}}))
	f.Add([]byte(`{"mqTable":{{"topic":"T","brokerName":"b","queueId":0}:{}},"properties":{}}`))
	f.Add([]byte(`{"mqTable":{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ri, err := DecodeConsumerRunningInfo(b)
		if err == nil && ri == nil {
			t.Fatal("nil info without error")
		}
	})
}

func FuzzDecodeConsumeStatsList(f *testing.F) {
	f.Add([]byte(`{"brokerAddr":"a","consumeStatsList":[{"G":[{"offsetTable":{{"topic":"T","brokerName":"b","queueId":0}:{"brokerOffset":1,"consumerOffset":0,"lastTimestamp":0}},"consumeTps":0.0}]}],"totalDiff":1,"totalInflightDiff":0}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := DecodeConsumeStatsList(b)
		if err != nil {
			return
		}
		for _, m := range l.ConsumeStatsList {
			for _, list := range m {
				for _, cs := range list {
					for k := range cs.OffsetTable {
						_, _ = ParseQueueKey(k)
					}
				}
			}
		}
	})
}
