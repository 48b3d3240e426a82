package remoting

import (
	"errors"
	"strings"
	"testing"
)

type sendHeader struct {
	ProducerGroup string  `ext:"producerGroup,required"`
	Topic         string  `ext:"topic,required"`
	QueueID       int32   `ext:"queueId"`
	SysFlag       int     `ext:"sysFlag"`
	Born          int64   `ext:"bornTimestamp"`
	Batch         bool    `ext:"batch"`
	Ratio         float64 `ext:"ratio,omitempty"`
	Small         uint8   `ext:"small"`
	Skipped       string
}

func TestHeaderEncodeDecode(t *testing.T) {
	in := sendHeader{ProducerGroup: "g", Topic: "t", QueueID: 0, SysFlag: 4, Born: -5, Batch: true, Small: 255, Skipped: "x"}
	req := NewRequest(RequestSendMessage, &in, nil)
	want := map[string]string{"producerGroup": "g", "topic": "t", "queueId": "0", "sysFlag": "4",
		"bornTimestamp": "-5", "batch": "true", "small": "255"}
	if len(req.ExtFields) != len(want) {
		t.Fatalf("ext %v, want %v", req.ExtFields, want)
	}
	for k, v := range want {
		if req.ExtFields[k] != v {
			t.Fatalf("ext[%s]=%q, want %q", k, req.ExtFields[k], v)
		}
	}
	var out sendHeader
	if err := req.DecodeHeader(&out); err != nil {
		t.Fatal(err)
	}
	in.Skipped = ""
	if out != in {
		t.Fatalf("decoded %+v, want %+v", out, in)
	}
}

func TestHeaderRequiredMissingNamesField(t *testing.T) {
	req := NewRequest(RequestSendMessage, nil, nil)
	req.ExtFields["producerGroup"] = "g"
	var h sendHeader
	err := req.DecodeHeader(&h)
	var he *HeaderError
	if !errors.As(err, &he) || he.Field != "topic" || !errors.Is(err, ErrInvalidHeader) {
		t.Fatalf("got %v, want HeaderError naming topic", err)
	}
	if !strings.Contains(err.Error(), `"topic"`) {
		t.Fatalf("message does not name the field: %v", err)
	}
}

func TestHeaderUnparsableValueNamesField(t *testing.T) {
	for field, val := range map[string]string{"queueId": "x1", "small": "256", "batch": "maybe", "ratio": "1e"} {
		req := NewRequest(RequestSendMessage, nil, nil)
		req.ExtFields = map[string]string{"producerGroup": "g", "topic": "t", field: val}
		var h sendHeader
		err := req.DecodeHeader(&h)
		var he *HeaderError
		if !errors.As(err, &he) || he.Field != field || he.Value != val {
			t.Fatalf("%s=%s: got %v", field, val, err)
		}
	}
}

func TestDecodeHeaderNeedsPointer(t *testing.T) {
	req := NewRequest(RequestSendMessage, nil, nil)
	if err := req.DecodeHeader(sendHeader{}); err == nil {
		t.Fatal("DecodeHeader accepted a non-pointer")
	}
}

func TestResponseError(t *testing.T) {
	if err := ResponseError("a", NewResponse(ResponseSuccess, "")); err != nil {
		t.Fatal(err)
	}
	err := ResponseError("a:1", busyResponse())
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != ResponseSystemBusy || !errors.Is(err, ErrServerBusy) {
		t.Fatalf("got %v", err)
	}
	if errors.Is(ResponseError("a", NewResponse(ResponseTopicNotExist, "no route")), ErrServerBusy) {
		t.Fatal("TOPIC_NOT_EXIST must not look like busy")
	}
}
