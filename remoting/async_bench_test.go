package remoting

import "testing"

// BenchmarkAsyncTracker adds and removes responders with 1,000 open, as a
// leader answering pipelined sends an entry at a time does; ns/op is one
// add plus one remove.
func BenchmarkAsyncTracker(b *testing.B) {
	var t asyncTracker
	const open = 1000
	rs := make([]*Responder, open)
	for i := range rs {
		rs[i] = &Responder{t: &t}
		t.add(rs[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := i % open
		t.remove(rs[k])
		rs[k] = &Responder{t: &t}
		t.add(rs[k])
	}
}
