// Package logging builds the zap loggers the raftmq binary hands to every
// component. Library packages never build their own: they take a *zap.Logger.
//
// A Config (keys logLevel, logFormat, logFile, logFileMaxSizeMB,
// logFileMaxBackups, logFileMaxAgeDays, logFileCompress; embedded in the
// broker's and name server's configs) chooses JSON or text lines, on
// stderr or in a file. A file rotates by size through
// gopkg.in/natefinch/lumberjack.v2 and is reopened at the same path on
// SIGHUP, so an external logrotate may move it away instead of truncating.
//
// # Files
//
//   - config.go: Config (keys, defaults, Validate), Open (the logger and
//     its file), Logger.Reopen, ReopenOnSIGHUP and Close.
//   - logging.go: New, JSON on stderr at a level (tests and tools).
package logging
