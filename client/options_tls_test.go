package client

import (
	"context"
	"errors"
	"testing"
)

func TestWithTLSBadTrustPath(t *testing.T) {
	_, err := NewProducer(NameServers("127.0.0.1:9876"), WithTLS(t.TempDir()+"/missing.pem"))
	if !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("NewProducer with a missing trust file: %v, want ErrInvalidOption", err)
	}
	a, err := NewAdmin(NameServers("127.0.0.1:9876"), WithTLS(""), WithTLSConfig(nil))
	if err != nil {
		t.Fatalf("WithTLS(\"\") then WithTLSConfig(nil): %v", err)
	}
	_ = a.Close(context.Background())
}
