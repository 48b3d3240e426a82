package namesrv

import (
	"context"
	"encoding/json"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// putKVConfig answers PUT_KV_CONFIG (100). A failed file write is
// SYSTEM_ERROR naming the file, and the table keeps its previous value.
func (n *NameServer) putKVConfig(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.PutKVConfigRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	if err := n.kv.Put(h.Namespace, h.Key, h.Value); err != nil {
		return remoting.NewResponse(remoting.ResponseSystemError, err.Error()), nil
	}
	return success(), nil
}

// getKVConfig answers GET_KV_CONFIG (101): extField value, or QUERY_NOT_FOUND.
func (n *NameServer) getKVConfig(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.KVConfigRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	v, ok := n.kv.Get(h.Namespace, h.Key)
	if !ok {
		return remoting.NewResponse(remoting.ResponseQueryNotFound,
			"No config item, Namespace: "+h.Namespace+" Key: "+h.Key), nil
	}
	resp := success()
	resp.EncodeHeader(&wire.GetKVConfigResponseHeader{Value: v})
	return resp, nil
}

// deleteKVConfig answers DELETE_KV_CONFIG (102).
func (n *NameServer) deleteKVConfig(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.KVConfigRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	if err := n.kv.Delete(h.Namespace, h.Key); err != nil {
		return remoting.NewResponse(remoting.ResponseSystemError, err.Error()), nil
	}
	return success(), nil
}

// getKVListByNamespace answers GET_KVLIST_BY_NAMESPACE (219) with a KVTable
// body, or QUERY_NOT_FOUND.
func (n *NameServer) getKVListByNamespace(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.GetKVListByNamespaceRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	kv, ok := n.kv.List(h.Namespace)
	if !ok {
		return remoting.NewResponse(remoting.ResponseQueryNotFound, "No config item, Namespace: "+h.Namespace), nil
	}
	resp := success()
	resp.Body, _ = json.Marshal(wire.KVTable{Table: kv})
	return resp, nil
}
