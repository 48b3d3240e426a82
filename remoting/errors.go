package remoting

import (
	"errors"
	"fmt"
)

// Sentinel errors of the remoting package. Callers compare with errors.Is;
// wrapped errors add the detail (remote address, code, field name).
var (
	// ErrTimeout means no response arrived before the call's deadline (the
	// context deadline or ClientConfig.DefaultTimeout). The request may
	// still have been executed by the peer.
	ErrTimeout = errors.New("remoting: timeout waiting for response")

	// ErrConnClosed means the connection closed before the call completed,
	// or a call was attempted on a closed connection, client or server.
	ErrConnClosed = errors.New("remoting: connection closed")

	// ErrFrameTooLarge means a frame's length field exceeds the configured
	// maximum frame size (16 MiB by default). The connection is closed.
	ErrFrameTooLarge = errors.New("remoting: frame too large")

	// ErrInvalidFrame means the bytes on the wire are not a RocketMQ frame:
	// a length below the minimum, a header length beyond the frame, or an
	// unknown serialize type.
	ErrInvalidFrame = errors.New("remoting: invalid frame")

	// ErrInvalidHeader means a command header could not be decoded: invalid
	// JSON or ROCKETMQ header bytes, or a custom header field that is
	// missing or unparsable (see *HeaderError).
	ErrInvalidHeader = errors.New("remoting: invalid header")

	// ErrServerBusy means the peer (or the local async semaphore) refused
	// the request for lack of capacity: a SYSTEM_BUSY response.
	ErrServerBusy = errors.New("remoting: server busy")

	// ErrTooManyRequests means InvokeAsync could not acquire a slot of
	// ClientConfig.MaxAsyncInflight before its deadline.
	ErrTooManyRequests = errors.New("remoting: too many async requests in flight")

	// ErrTLSConfig means a tls* key is invalid or names a file that does
	// not load (see TLSConfig).
	ErrTLSConfig = errors.New("remoting: invalid TLS configuration")

	// ErrServerClosed is returned by Server methods after Shutdown.
	ErrServerClosed = errors.New("remoting: server closed")

	// ErrClientClosed is returned by Client methods after Close.
	ErrClientClosed = errors.New("remoting: client closed")
)

// HeaderError reports a custom-header field that is missing or whose
// extFields value cannot be parsed into the struct field's type. It
// unwraps to ErrInvalidHeader.
type HeaderError struct {
	// Field is the extFields key (the `ext` tag name).
	Field string
	// Value is the offending value; empty when the field is missing.
	Value string
	// Reason says what was wrong, e.g. "required field missing".
	Reason string
}

// Error implements error.
func (e *HeaderError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("remoting: invalid header field %q: %s", e.Field, e.Reason)
	}
	// The error becomes a response's remark: quote only the start of a
	// value that may be megabytes.
	const most = 64
	if len(e.Value) > most {
		return fmt.Sprintf("remoting: invalid header field %q=%q… (%d bytes): %s", e.Field, e.Value[:most], len(e.Value), e.Reason)
	}
	return fmt.Sprintf("remoting: invalid header field %q=%q: %s", e.Field, e.Value, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidHeader) true.
func (e *HeaderError) Unwrap() error { return ErrInvalidHeader }

// RemoteError is returned by Client helpers that turn a non-success
// response into an error; it carries the response code and remark so
// callers can branch on the code with errors.As.
type RemoteError struct {
	// Addr is the peer that answered.
	Addr string
	// Code is the response code, e.g. ResponseSystemBusy.
	Code int16
	// Remark is the response's remark text.
	Remark string
}

// Error implements error.
func (e *RemoteError) Error() string {
	return fmt.Sprintf("remoting: %s answered code %d: %s", e.Addr, e.Code, e.Remark)
}

// Unwrap maps SYSTEM_BUSY to ErrServerBusy so callers can use errors.Is.
func (e *RemoteError) Unwrap() error {
	if e.Code == ResponseSystemBusy {
		return ErrServerBusy
	}
	return nil
}

// ResponseError returns nil when resp is a SUCCESS response and a
// *RemoteError carrying its code and remark otherwise, for callers that
// treat every other code as a failure.
func ResponseError(addr string, resp *RemotingCommand) error {
	if resp.Code == ResponseSuccess {
		return nil
	}
	return &RemoteError{Addr: addr, Code: resp.Code, Remark: resp.Remark}
}
