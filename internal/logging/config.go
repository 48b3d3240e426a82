package logging

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"gopkg.in/natefinch/lumberjack.v2"
)

// ErrInvalidConfig is wrapped by Config.Validate's errors.
var ErrInvalidConfig = errors.New("logging: invalid config")

// Config is where and how the process logs; the broker and name server
// embed it, so its keys load from broker.conf and namesrv.conf.
type Config struct {
	// Level is debug, info, warn or error (info). The --log-level flag,
	// when given, overrides it.
	Level string `prop:"logLevel"`
	// Format is json (one JSON object a line, the default: for log
	// shippers) or text (zap's console layout: time, level, logger,
	// message, then the fields as JSON; for people).
	Format string `prop:"logFormat"`
	// File is the log file; empty logs to stderr. The file is created with
	// mode 0600, rotated by size (below) and reopened at the same path on
	// SIGHUP, so an external logrotate can move it away (no copytruncate
	// needed).
	File string `prop:"logFile"`
	// FileMaxSizeMB rotates the file once it would grow past this many
	// MiB (100): it is renamed with a timestamp and a new one started. 0
	// never rotates by size (leave rotation to logrotate and SIGHUP).
	FileMaxSizeMB int `prop:"logFileMaxSizeMB"`
	// FileMaxBackups is how many rotated files to keep (10; 0 keeps all).
	FileMaxBackups int `prop:"logFileMaxBackups"`
	// FileMaxAgeDays deletes rotated files older than this (0: by count
	// only).
	FileMaxAgeDays int `prop:"logFileMaxAgeDays"`
	// FileCompress gzips rotated files.
	FileCompress bool `prop:"logFileCompress"`
}

// DefaultConfig logs JSON at info to stderr; a file, once named, rotates
// at 100 MiB keeping 10 backups.
func DefaultConfig() Config {
	return Config{Level: "info", Format: "json", FileMaxSizeMB: 100, FileMaxBackups: 10}
}

// Validate reports every bad setting (errors.Join), each naming its key.
func (c Config) Validate() error {
	var errs []error
	if _, err := zapcore.ParseLevel(c.Level); err != nil {
		errs = append(errs, fmt.Errorf("%w: logLevel %q: want debug, info, warn or error", ErrInvalidConfig, c.Level))
	}
	if c.Format != "json" && c.Format != "text" {
		errs = append(errs, fmt.Errorf("%w: logFormat %q: want json or text", ErrInvalidConfig, c.Format))
	}
	if c.FileMaxSizeMB < 0 || c.FileMaxBackups < 0 || c.FileMaxAgeDays < 0 {
		errs = append(errs, fmt.Errorf("%w: logFileMaxSizeMB, logFileMaxBackups and logFileMaxAgeDays must not be negative", ErrInvalidConfig))
	}
	return errors.Join(errs...)
}

// Logger is the process logger and, when it writes to a file, that file.
type Logger struct {
	*zap.Logger
	file *lumberjack.Logger // nil on stderr

	mu      sync.Mutex // guards stopHUP
	stopHUP func()
}

// Open builds the logger c describes. Close it when the process ends.
func Open(c Config) (*Logger, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	lvl, _ := zapcore.ParseLevel(c.Level)
	ec := zap.NewProductionEncoderConfig()
	ec.TimeKey = "ts"
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	if c.Format == "text" {
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	} else {
		enc = zapcore.NewJSONEncoder(ec)
	}
	l := &Logger{}
	var out zapcore.WriteSyncer = zapcore.Lock(os.Stderr)
	if c.File != "" {
		size := c.FileMaxSizeMB
		if size == 0 {
			size = math.MaxInt32 // lumberjack reads 0 as 100 MiB
		}
		l.file = &lumberjack.Logger{Filename: c.File, MaxSize: size, MaxBackups: c.FileMaxBackups,
			MaxAge: c.FileMaxAgeDays, Compress: c.FileCompress}
		// Open now, so a path that cannot be written fails at start rather
		// than at the first log line.
		if _, err := l.file.Write(nil); err != nil {
			return nil, fmt.Errorf("logging: logFile %s: %w", c.File, err)
		}
		out = zapcore.AddSync(l.file) // lumberjack serializes writes itself
	}
	// No sampling: repeated warnings about the same bad peer are what an
	// operator needs while chasing it; components already warn once per
	// condition.
	core := zapcore.NewCore(enc, out, zap.NewAtomicLevelAt(lvl))
	l.Logger = zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel), zap.ErrorOutput(zapcore.Lock(os.Stderr)))
	return l, nil
}

// File is the log file's path ("" on stderr).
func (l *Logger) File() string {
	if l.file == nil {
		return ""
	}
	return l.file.Filename
}

// Reopen closes the log file; the next line opens the file at the same
// path again (creating it if logrotate moved it away). A no-op on stderr.
func (l *Logger) Reopen() error {
	if l.file == nil {
		return nil
	}
	return l.file.Close()
}

// ReopenOnSIGHUP reopens the file on every SIGHUP until Close. On stderr
// it does nothing, leaving SIGHUP's default action (exit) alone.
func (l *Logger) ReopenOnSIGHUP() {
	if l.file == nil {
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-ch:
				if err := l.Reopen(); err != nil {
					l.Warn("reopen log file on SIGHUP", zap.String("file", l.File()), zap.Error(err))
				} else {
					l.Info("log file reopened on SIGHUP", zap.String("file", l.File()))
				}
			}
		}
	}()
	l.mu.Lock()
	l.stopHUP = func() {
		signal.Stop(ch)
		close(quit)
		<-done
	}
	l.mu.Unlock()
}

// Close stops the SIGHUP handler, flushes and closes the file.
func (l *Logger) Close() error {
	l.mu.Lock()
	stop := l.stopHUP
	l.stopHUP = nil
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
	_ = l.Sync() // stderr's Sync fails on some terminals; nothing to do about it
	if l.file != nil {
		return l.file.Close()
	}
	return nil
}
