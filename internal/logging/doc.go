// Package logging builds the zap loggers the raftmq binary hands to every
// component. Library packages never build their own: they take a *zap.Logger.
//
// # Files
//
//   - logging.go: New, a JSON logger on stderr at the given level.
package logging
