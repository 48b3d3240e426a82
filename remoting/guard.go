package remoting

// Guard inspects a request before the server routes it; a non-nil answer
// is written instead of running the handler (an ACL refusal: RocketMQ's
// server RPC hook that throws). It runs on the connection's reader, so it
// must be quick and must not block.
type Guard func(c *Conn, req *RemotingCommand) *RemotingCommand

// SetGuard installs g for every request the server receives; nil removes
// it. Set it before Start.
func (s *Server) SetGuard(g Guard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updateRoutesLocked(func(t *routeTable) { t.guard = g })
}

// guarded runs the guard g (the route table's, read by the caller with
// the route); true means the request was answered.
func guarded(g Guard, c *Conn, req *RemotingCommand) bool {
	if g == nil {
		return false
	}
	resp := g(c, req)
	if resp == nil {
		return false
	}
	if !req.IsOneway() {
		_ = c.WriteResponse(req, resp)
	}
	return true
}
