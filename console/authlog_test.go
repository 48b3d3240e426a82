package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Every refused sign-in logged a warning: anyone reaching the port could
// write the name server's log as fast as it sent requests. A burst now
// logs one warning a second.
func TestWrongCredentialsLogBounded(t *testing.T) {
	ns := startNamesrv(t)
	core, logs := observer.New(zapcore.WarnLevel)
	c, err := New(ns, Options{AccessKey: "console-ak", SecretKey: "console-sk", Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := c.Handler()
	for i := range 200 {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/api/auth", nil)
		// From as many addresses: one address is locked out after a few.
		req.RemoteAddr = fmt.Sprintf("192.0.2.%d:1234", i)
		req.SetBasicAuth("console-ak", "wrong")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong secret: %d %s", rec.Code, rec.Body)
		}
	}
	// 200 requests take far less than a few seconds here.
	if n := logs.FilterMessage("console request refused: wrong credentials").Len(); n < 1 || n > 3 {
		t.Errorf("200 refused sign-ins logged %d warnings, want 1 a second", n)
	}
}
