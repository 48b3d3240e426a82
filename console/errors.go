package console

import "errors"

var (
	// ErrCredentials means only one of the access key and the secret key
	// was given (consoleAccessKey and consoleSecretKey go together), or
	// one shorter than remoting.MinKeyLength.
	ErrCredentials = errors.New("console: invalid console account")
	// ErrNoHTTP means the name server has no monitoring port to serve the
	// console on (metricsPort=-1).
	ErrNoHTTP = errors.New("console: the name server's HTTP port is off (metricsPort=-1); the console needs it")
	// ErrNotStarted means the name server is not listening yet.
	ErrNotStarted = errors.New("console: the name server is not started")
)
