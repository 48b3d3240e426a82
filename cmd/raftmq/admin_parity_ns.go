package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Name-server commands of mqadmin: config, KV, write permissions and
// order config (rows in admin_parity.go).

func (s *adminSession) eachNameServer(ctx context.Context, code int16, header any, body []byte) ([]string, error) {
	var done []string
	var errs []error
	for _, ns := range s.ns {
		if _, err := s.a.NameServerRequestAt(ctx, ns, code, header, body); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, ns)
	}
	return done, errors.Join(errs...)
}

// listed makes the failure of some name servers a partialFailure when
// others took the change, for the commands that print the ones that did.
func listed(done []string, err error) ([]string, error) {
	if err != nil && len(done) > 0 {
		return done, partialFailure{err}
	}
	return done, err
}

func runGetNamesrvConfig(ctx context.Context, s *adminSession, _ flagValues) ([]targeted[map[string]string], error) {
	var out []targeted[map[string]string]
	for _, ns := range s.ns {
		kv, err := s.a.NameServerConfig(ctx, ns)
		if err != nil {
			return out, err
		}
		out = append(out, targeted[map[string]string]{ns, kv})
	}
	return out, nil
}

// permChange is one name server's answer to wipe/addWritePerm.
type permChange struct {
	BrokerName string `json:"brokerName"`
	NameServer string `json:"nameServer"`
	Topics     int    `json:"topics"`
}

func (s *adminSession) writePerm(ctx context.Context, code int16, brokerName string) ([]permChange, error) {
	var out []permChange
	var errs []error
	for _, ns := range s.ns {
		resp, err := s.a.NameServerRequestAt(ctx, ns, code, &wire.BrokerNameRequestHeader{BrokerName: brokerName}, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n := 0
		if code == remoting.RequestWipeWritePermOfBroker {
			var h wire.WipeWritePermResponseHeader
			err = resp.DecodeHeader(&h)
			n = h.WipeTopicCount
		} else {
			var h wire.AddWritePermResponseHeader
			err = resp.DecodeHeader(&h)
			n = h.AddTopicCount
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, permChange{brokerName, ns, n})
	}
	return out, partial(len(out), errs)
}

// orderConf is updateOrderConf's result.
type orderConf struct {
	Topic     string `json:"topic"`
	Method    string `json:"method"`
	OrderConf string `json:"orderConf,omitempty"`
}

func runUpdateOrderConf(ctx context.Context, s *adminSession, in flagValues) (orderConf, error) {
	r := orderConf{Topic: in.str("topic"), Method: strings.ToLower(in.str("method")), OrderConf: in.str("orderConf")}
	h := &wire.PutKVConfigRequestHeader{Namespace: wire.NamespaceOrderTopicConfig, Key: r.Topic, Value: r.OrderConf}
	switch r.Method {
	case "get":
		resp, err := s.a.NameServerRequest(ctx, remoting.RequestGetKVConfig, h, nil)
		if err != nil {
			return r, err
		}
		var gh wire.GetKVConfigResponseHeader
		err = resp.DecodeHeader(&gh)
		r.OrderConf = gh.Value
		return r, err
	case "put":
		if r.OrderConf == "" {
			return r, fmt.Errorf("%w: updateOrderConf -m put needs -v brokerName:num[;brokerName:num]", errAdminUsage)
		}
		_, err := s.eachNameServer(ctx, remoting.RequestPutKVConfig, h, nil)
		return r, err
	case "delete":
		_, err := s.eachNameServer(ctx, remoting.RequestDeleteKVConfig, h, nil)
		return r, err
	}
	return r, fmt.Errorf("%w: -m %q: want put, get or delete", errAdminUsage, r.Method)
}
