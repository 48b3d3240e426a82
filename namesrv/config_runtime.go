package namesrv

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/remoting"
)

// GET_NAMESRV_CONFIG (319) and UPDATE_NAMESRV_CONFIG (318), mqadmin
// getNamesrvConfig/updateNamesrvConfig. The answer and the update body are
// properties text, as RocketMQ's. Only the switches read per request can
// change at runtime; the change lasts until the process restarts (edit
// namesrv.conf for permanence), and each name server is updated on its own
// (mqadmin sends the request to every -n address).

// RuntimeConfigKeys are the keys UPDATE_NAMESRV_CONFIG may change.
var RuntimeConfigKeys = []string{"orderMessageEnable", "returnOrderTopicConfigToBroker", "enableAllTopicList", "enableTopicList"}

// runtimeCfg is the config with runtime changes; nil until the first one.
type runtimeCfg struct {
	mu sync.Mutex // serialises updates
	p  atomic.Pointer[Config]
}

// live is the config the runtime-changeable switches are read from.
func (n *NameServer) live() *Config {
	if c := n.rt.p.Load(); c != nil {
		return c
	}
	return &n.cfg
}

func (n *NameServer) getNamesrvConfig(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var buf bytes.Buffer
	cfg := *n.live()
	cfg.redactSecrets()
	if err := config.Print(&buf, &cfg); err != nil {
		return remoting.NewResponse(remoting.ResponseSystemError, "render config: "+err.Error()), nil
	}
	resp := success()
	resp.Body = buf.Bytes()
	return resp, nil
}

func (n *NameServer) updateNamesrvConfig(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	kv, err := config.ParseProperties(req.Body)
	if err != nil {
		return remoting.NewResponse(remoting.ResponseInvalidParameter, "update namesrv config: body is not a properties text: "+err.Error()), nil
	}
	var refused []string
	for k := range kv {
		if !slices.Contains(RuntimeConfigKeys, k) {
			refused = append(refused, k)
		}
	}
	if len(kv) == 0 || len(refused) > 0 {
		slices.Sort(refused)
		return remoting.NewResponse(remoting.ResponseInvalidParameter, "update namesrv config: "+orNone(refused)+
			" cannot change at runtime (edit namesrv.conf and restart); changeable: "+strings.Join(RuntimeConfigKeys, ", ")), nil
	}
	n.rt.mu.Lock()
	defer n.rt.mu.Unlock()
	next := *n.live()
	if err := config.Apply(kv, "UPDATE_NAMESRV_CONFIG", &next); err != nil {
		return remoting.NewResponse(remoting.ResponseInvalidParameter, "update namesrv config: "+err.Error()), nil
	}
	n.rt.p.Store(&next)
	n.log.Info("name server config updated at runtime (until restart)", zap.Any("changes", maps.Clone(kv)))
	return success(), nil
}

func orNone(keys []string) string {
	if len(keys) == 0 {
		return "no key given:"
	}
	return strings.Join(keys, ", ")
}
