package httpmon

import "errors"

// ErrListen means the monitoring port could not be bound (in use, or no
// permission); set metricsPort to another port or -1 to turn it off.
var ErrListen = errors.New("httpmon: cannot listen")
