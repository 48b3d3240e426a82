package client

import (
	"errors"
	"testing"
)

// WithCredentials needs both keys; a token needs an account.
func TestWithCredentialsValidation(t *testing.T) {
	for _, opts := range [][]Opt{
		{WithCredentials("accessKey1", "")},
		{WithCredentials("", "secretKey1")},
		{WithSecurityToken("tok")},
	} {
		if _, err := NewProducer(NameServers("127.0.0.1:9876"), opts[0]); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("producer: %v, want ErrInvalidOption", err)
		}
		if _, err := NewAdmin(NameServers("127.0.0.1:9876"), opts[0]); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("admin: %v, want ErrInvalidOption", err)
		}
	}
	if _, err := NewProducer(NameServers("127.0.0.1:9876"), WithCredentials("accessKey1", "secretKey1"), WithSecurityToken("tok")); err != nil {
		t.Fatal(err)
	}
}
