package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/wire"
)

// maxLookupResults bounds the messages one key lookup returns per group.
const maxLookupResults = 32

// maxLookupBody bounds the bytes of a body a lookup shows: an answer
// holds up to maxLookupResults messages per broker group, and JSON writes
// a byte such as '<' or a control character as six.
const maxLookupBody = 64 << 10

// maxLookups bounds the lookups in flight: each holds the brokers'
// answers (up to a frame, 16 MiB, per broker group) until they are
// clipped, and without an account anyone reaching the port may look up.
const maxLookups = 4

// MessageView is one looked-up message.
type MessageView struct {
	Topic           string            `json:"topic"`
	Tags            string            `json:"tags,omitempty"`
	Keys            []string          `json:"keys,omitempty"`
	MsgID           string            `json:"msgId"`
	OffsetMsgID     string            `json:"offsetMsgId"`
	QueueID         int32             `json:"queueId"`
	QueueOffset     int64             `json:"queueOffset"`
	CommitLogOffset int64             `json:"commitLogOffset"`
	BornTimestamp   int64             `json:"bornTimestamp"`
	StoreTimestamp  int64             `json:"storeTimestamp"`
	BornHost        string            `json:"bornHost"`
	StoreHost       string            `json:"storeHost"`
	ReconsumeTimes  int32             `json:"reconsumeTimes"`
	Properties      map[string]string `json:"properties,omitempty"`
	// Body is the body as text when it is UTF-8, else base64 (with
	// BodyEncoding "base64").
	Body         string `json:"body"`
	BodyEncoding string `json:"bodyEncoding"`
	// BodySize is the whole body's length; BodyTruncated says Body shows
	// only its first maxLookupBody bytes (or a few less, ending on a
	// whole UTF-8 character).
	BodySize      int  `json:"bodySize"`
	BodyTruncated bool `json:"bodyTruncated,omitempty"`
}

// MessagesView is GET /api/message's answer.
type MessagesView struct {
	Messages []MessageView `json:"messages"`
}

func viewOf(m *client.MessageExt) MessageView {
	v := MessageView{Topic: m.Topic, Tags: m.Tags, Keys: m.Keys, MsgID: m.MsgID, OffsetMsgID: m.OffsetMsgID, QueueID: m.QueueID,
		QueueOffset: m.QueueOffset, CommitLogOffset: m.CommitLogOffset, BornTimestamp: m.BornTimestamp,
		StoreTimestamp: m.StoreTimestamp, BornHost: m.BornHost, StoreHost: m.StoreHost, ReconsumeTimes: m.ReconsumeTimes,
		Properties: m.Properties, BodySize: len(m.Body), BodyEncoding: "text"}
	body := m.Body
	if len(body) > maxLookupBody {
		// Cut on a character boundary, so that a UTF-8 body stays text.
		cut := maxLookupBody
		for i := cut; i > cut-utf8.UTFMax; i-- {
			if utf8.RuneStart(body[i]) {
				cut = i
				break
			}
		}
		body, v.BodyTruncated = body[:cut], true
	}
	v.Body = string(body)
	if !utf8.Valid(body) {
		v.BodyEncoding, v.Body = "base64", encodeBase64(body)
	}
	return v
}

// serveMessage is GET /api/message?topic=T&key=K (QUERY_MESSAGE by key)
// or ?id=ID[&topic=T]: an offset msgId naming a registered broker is read
// there (VIEW_MESSAGE_BY_ID), anything else is taken as the client msgId
// (UNIQ_KEY) of topic. Message bodies are data the ACL protects, so with
// a console account configured the request must be authenticated.
func (c *Console) serveMessage(w http.ResponseWriter, r *http.Request) {
	if c.opts.AccessKey != "" && !c.authenticated(w, r) {
		return
	}
	q := r.URL.Query()
	topic, key, id := q.Get("topic"), q.Get("key"), q.Get("id")
	if (key == "") == (id == "") || (key != "" && topic == "") {
		writeError(w, http.StatusBadRequest, "give topic and key, or id (an offset msgId, or a client msgId with its topic)")
		return
	}
	select {
	case c.lookups <- struct{}{}:
		defer func() { <-c.lookups }()
	default:
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("%d message lookups are running; try again when one is done", maxLookups))
		return
	}
	adm, err := c.client()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.opts.TransferWait)
	defer cancel()
	var msgs []*client.MessageExt
	switch {
	case key != "":
		msgs, err = adm.QueryMessageByKey(ctx, topic, key, maxLookupResults, time.UnixMilli(0), time.Now().Add(time.Hour))
	case c.isBrokerMsgID(id):
		var m *client.MessageExt
		if m, err = adm.ViewMessage(ctx, id); err == nil {
			msgs = []*client.MessageExt{m}
		} else if errors.Is(err, client.ErrMessageNotFound) && topic != "" {
			msgs, err = adm.QueryMessageByUniqueKey(ctx, topic, id)
		}
	case topic == "":
		writeError(w, http.StatusBadRequest, "id "+id+" is not an offset msgId of a registered broker; a client msgId (UNIQ_KEY) needs its topic")
		return
	default:
		msgs, err = adm.QueryMessageByUniqueKey(ctx, topic, id)
	}
	switch {
	case errors.Is(err, client.ErrMessageNotFound) || errors.Is(err, client.ErrNoRoute):
		writeError(w, http.StatusNotFound, err.Error())
		return
	case err != nil:
		writeBrokerError(w, err)
		return
	}
	out := MessagesView{Messages: make([]MessageView, 0, len(msgs))}
	for _, m := range msgs {
		out.Messages = append(out.Messages, viewOf(m))
	}
	writeJSON(w, http.StatusOK, out)
}

// isBrokerMsgID reports whether id decodes as an offset msgId naming a
// registered broker: both id forms are 32 hex digits.
func (c *Console) isBrokerMsgID(id string) bool {
	mid, err := wire.ParseMessageID(id)
	if err != nil {
		return false
	}
	for _, b := range c.ns.Routes().ClusterInfo().BrokerAddrTable {
		for _, a := range b.BrokerAddrs {
			if a == mid.Addr.String() {
				return true
			}
		}
	}
	return false
}
