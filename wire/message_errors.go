package wire

import (
	"errors"
	"fmt"
)

// Errors of the message codecs (stored messages, batch bodies, msgIds).
// Callers compare with errors.Is; the store and the SDK re-export them
// under their own names so either package's sentinel matches.
var (
	// ErrMalformedMessage means bytes that should hold stored messages (a
	// pull body) or a batch body could not be decoded; see *DecodeError.
	ErrMalformedMessage = errors.New("wire: malformed message data")

	// ErrCorruptMessage is returned by the strict stored-message decoder
	// (DecodeMessage, CheckEntry) when an entry fails its magic, size or
	// CRC check. Nothing at or past such an entry may be served.
	ErrCorruptMessage = errors.New("wire: corrupt message")

	// ErrEndOfData is returned by CheckEntry on an all-zero header: the end
	// of the written data of a segment.
	ErrEndOfData = errors.New("wire: end of data")

	// ErrMessageIllegal means a message cannot be encoded: its topic or
	// properties are longer than the format's int16 lengths allow.
	ErrMessageIllegal = errors.New("wire: message illegal")

	// ErrInvalidMessageID means a msgId string is not the hex layout
	// RocketMQ produces.
	ErrInvalidMessageID = errors.New("wire: invalid message id")
)

// DecodeError reports where stored-message or batch bytes stopped making
// sense. It unwraps to ErrMalformedMessage.
type DecodeError struct {
	// Offset is the byte offset of the message being decoded.
	Offset int
	// Reason says what was wrong, e.g. "body length 70000 beyond data".
	Reason string
}

// Error implements error.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("wire: malformed message at byte %d: %s", e.Offset, e.Reason)
}

// Unwrap makes errors.Is(err, ErrMalformedMessage) true.
func (e *DecodeError) Unwrap() error { return ErrMalformedMessage }
