package broker

import "errors"

// Sentinel errors of the request-processor half of the package (the group
// half's live in errors.go; kept apart so the two engineers never edit the
// same file at once — to be merged into errors.go).

// ErrInvalidBrokerConfig is returned by BrokerConfig.Validate; the message
// names the key at fault.
var ErrInvalidBrokerConfig = errors.New("broker: invalid broker config")

// ErrControllerClosed is returned by Controller calls after Shutdown.
var ErrControllerClosed = errors.New("broker: controller is shut down")
