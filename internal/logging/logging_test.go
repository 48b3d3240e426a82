package logging

import (
	"testing"

	"go.uber.org/zap/zapcore"
)

type zapLevel = zapcore.Level

func TestNewLevels(t *testing.T) {
	for _, l := range []string{"debug", "info", "warn", "error"} {
		lg, err := New(l)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if !lg.Core().Enabled(mustLevel(t, l)) {
			t.Fatalf("%s not enabled", l)
		}
	}
	if _, err := New("loud"); err == nil {
		t.Fatal("want error for unknown level")
	}
}

func mustLevel(t *testing.T, s string) (l zapLevel) {
	t.Helper()
	if err := l.UnmarshalText([]byte(s)); err != nil {
		t.Fatal(err)
	}
	return l
}
