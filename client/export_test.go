package client

import "github.com/raftmq/raftmq/remoting"

// AdminRemoting is a's remoting client, so that the package's external
// tests can watch its calls with a remoting.RPCHook.
func AdminRemoting(a *Admin) *remoting.Client { return a.rc }

// LiteRemoting is the remoting client of l, started (see AdminRemoting).
func LiteRemoting(l *LitePullConsumer) *remoting.Client { return l.core.rc }
