// Package remoting implements RocketMQ's remoting protocol: the framed RPC
// that every RocketMQ client, name server and broker speaks, so that
// unmodified RocketMQ clients can talk to raftmq.
//
// # Frame
//
// Every message on a connection is one frame (big-endian):
//
//	int32 length       4 + headerLen + bodyLen (the length field itself excluded)
//	int32 headerFlag   serialize type in the top byte (0 JSON, 1 ROCKETMQ),
//	                   header length in the low 24 bits
//	header             headerLen bytes
//	body               the rest
//
// JSON headers are objects with code, language (the enum NAME, "JAVA",
// "GO"), version, opaque, flag (bit 0 response, bit 1 oneway), remark and
// extFields (string → string). They are written exactly as the official Go
// client writes them, so captured client frames re-encode byte for byte.
// ROCKETMQ headers are int16 code, int8 language, int16 version, int32
// opaque, int32 flag, int32 remark length + remark, int32 extFields length
// + repeated (int16 key length, key, int32 value length, value). A response
// carries its request's opaque and serialize type. Frames above
// MaxFrameSize (16 MiB) are refused. EncodeFrame/AppendFrame and
// DecodeFrame are the codec; RemotingCommand.EncodeHeader / DecodeHeader
// map typed header structs (`ext:"name,required"` tags) to and from
// extFields. Hot paths skip the extFields map: a request's ExtAppender
// writes its header straight into the frame, and a call's
// LazyResponseExt (servers: AsyncOptions.LazyExt) leaves the decoded
// fields raw for ExtValue/RangeExt. Request and response codes live in
// codes.go, an append-only table.
//
// # Connections and workers
//
// A Conn has one reader goroutine and one writer goroutine. The reader
// parses frames: responses complete the matching pending call (opaque →
// future); requests are routed without blocking. The writer owns the
// socket's write side and batches queued frames into one flush, so
// responses can leave in any order. A frame that cannot be parsed, a
// length above the limit, or a frame not completed within FrameReadTimeout
// closes that connection only, with one Warn log line naming the remote
// address and the reason. A request whose header holds more than 1024
// extFields is answered SYSTEM_ERROR without them being decoded, and the
// connection reads on. Connections that send nothing for IdleTimeout
// are closed.
//
// The Server routes each request by code to the handler registered with
// Register (or RegisterDefault). Every registration owns a fixed pool of
// worker goroutines behind a bounded queue (RocketMQ's per-processor
// executor); when the queue is full, or the frames queued in all pools
// (and asynchronous requests not yet answered) reach QueuedRequestBudget
// bytes, the request is answered SYSTEM_BUSY at
// once, so load never turns into unbounded goroutines or memory.
// Asynchronous requests (sends) hold at most three quarters of the budget,
// so sends waiting for a stalled group leave room for heartbeats and pulls.
// Unknown
// codes get REQUEST_CODE_NOT_SUPPORTED; oneway requests get no response.
// Shutdown closes the listener, stops reading, lets every pool finish its
// queued and running requests, flushes their responses and only then
// closes the connections.
//
// The Client keeps one connection per address, dialed on first use and
// redialed after it fails. InvokeSync waits for the response until the
// context deadline (or DefaultTimeout), InvokeAsync hands it to a callback
// and is bounded by MaxAsyncInflight, InvokeOneway does not wait. A sweeper
// (every ScanInterval, RocketMQ's scanResponseTable) fails expired calls
// with ErrTimeout; a closing connection fails its pending calls with
// ErrConnClosed at once. A call that times out after CloseSilentAfter
// with not one byte received on its connection since it was written
// closes that connection (one Warn line), so the next call dials: a
// partition that drops packets leaves the socket open, and frames written
// on it after the heal wait out TCP's backed-off retransmission timer.
// The close is a reset (SO_LINGER 0): frames the peer never got are
// dropped, not delivered behind the calls that follow on a new
// connection (an ordered producer's next message). Frames a stalled peer's
// kernel already took can still be served after those calls should the
// peer resume as the same leader, as with RocketMQ's close on timeout.
// RocketMQ closes on every sync timeout (clientCloseSocketIfTimeout);
// here a connection still receiving other answers stays, so one slow
// call does not fail the calls pipelined beside it, and a long poll held
// silent by the server counts only once its own deadline passes.
// Servers may call clients on the same connection
// (NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_RUNNING_INFO): the client
// serves those through RegisterProcessor and a small bounded pool. RPC
// hooks run before and after every call on both sides.
//
// # TLS
//
// ServerConfig.TLSMode is RocketMQ's tls.server.mode: disabled, enforcing
// (TLS only) or permissive, where one port serves both: each connection's
// reader reads its first byte, and 0x16 (a TLS handshake record) starts a
// TLS server on it while anything else is replayed as plaintext; a frame
// cannot start with 0x16 because its length is below 16 MiB. The accept
// loop never reads, so a silent client holds up no one. ClientConfig.TLS
// runs the handshake as part of the dial. Verification follows RocketMQ's
// clients: with a trust path the server's chain is checked (not its host
// name, since brokers are reached at the IP they register), without one
// the server is not verified (the official Go client's WithTls). See
// docs/adr/0015-tls-permissive-mode.md.
//
// # Files
//
//   - codes.go: request and response codes, append-only tables.
//   - command.go: RemotingCommand, serialize and language types, flags,
//     NewRequest/NewResponse, the opaque counter.
//   - header.go: typed headers (`ext:"name[,required][,omitempty]"` tags) to
//     and from extFields; HeaderError names the field.
//   - codec.go: frame encoding and decoding in both serializations, the JSON
//     header written byte for byte like the official Go client, the raw
//     extFields block.
//   - extwriter.go: ExtAppender/ExtWriter, a header written straight into
//     the frame.
//   - conn.go: Conn (reader, writer, one write buffer, opaque → future,
//     deadlines, deferred answers); large frames grow as they arrive within
//     the server's incomplete-frame budget.
//   - pool.go: bounded worker pools (full ⇒ SYSTEM_BUSY), RPC hooks, handler
//     panics ⇒ SYSTEM_ERROR.
//   - server.go: Server (processor table, per-registration pools, graceful
//     Shutdown); async.go: asynchronous processors and their Responder.
//   - limits.go: the server's connection limits (per listener, per remote
//     IP: closed at accept), the write queue's byte bound (an answer waits
//     for room at most the write timeout, then the peer that does not
//     read is closed), LimitCounts, and WarnLimiter (one warning a second
//     for what clients trigger, counting the ones held back).
//   - client.go: Client (lazy dial, redial, sync/async/oneway, sweeper,
//     client-side processors); client_call.go: StartCall (a call on an open
//     connection answered in a callback, timed by its own timer, no
//     goroutine) and FailAsyncCalls for an owner that closes.
//   - signature.go: RocketMQ's ACL request signature (Credentials.Sign,
//     SigningHook for clients, VerifySignature for servers: HmacSHA1 over
//     the extFields' values sorted by key, then the body).
//   - guard.go: Server.SetGuard, a check before routing whose answer
//     replaces the handler's (the broker's ACL, the name server's
//     registration auth).
//   - tls.go: TLS (see below): TLSConfig (the tls* keys), TLSMode, the
//     permissive listener's first-byte sniffing, the client handshake.
//   - errors.go: the package's sentinels and typed errors.
//   - golden/: the official Go client against this server through a
//     recording proxy; testdata/golden holds the captured frames.
//
// Locks: clientEntry.mu → Client.mu; Server.mu and Conn.mu are leaves, and
// OnConnOpen and OnConnClose callbacks run with no remoting lock held.
package remoting
