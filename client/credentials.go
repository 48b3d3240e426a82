package client

import (
	"fmt"

	"github.com/raftmq/raftmq/remoting"
)

// WithCredentials signs every request the client sends — to brokers and
// to name servers, its inner producers' too (a push consumer's send-backs
// and dead letters, trace records) — with an ACL account of the brokers'
// plain_acl.yml, as RocketMQ's clients do (AclClientRPCHook; the official
// Go client's WithCredentials): the AccessKey field plus an HmacSHA1
// Signature over the sorted header values and the body. Needed when
// brokers run with aclEnable=true; a refused request fails with a
// *remoting.RemoteError of code NO_PERMISSION whose remark names the
// account, the resource and the missing permission.
func WithCredentials(accessKey, secretKey string) Opt {
	return commonOpt(func(c *commonConfig) {
		c.credentials.AccessKey, c.credentials.SecretKey = accessKey, secretKey
	})
}

// WithSecurityToken adds RocketMQ's optional SecurityToken field to signed
// requests (signed with them); plain ACL does not check it.
func WithSecurityToken(token string) Opt {
	return commonOpt(func(c *commonConfig) { c.credentials.SecurityToken = token })
}

// validateCredentials checks WithCredentials' pair.
func (c *commonConfig) validateCredentials() error {
	cr := c.credentials
	if (cr.AccessKey == "") != (cr.SecretKey == "") || (cr.SecurityToken != "" && cr.AccessKey == "") {
		return fmt.Errorf("%w: WithCredentials: access key and secret key are both required", ErrInvalidOption)
	}
	return nil
}

// sign installs the signing hook on rc when credentials are set.
func (c *commonConfig) sign(rc *remoting.Client) {
	if c.credentials.AccessKey != "" {
		rc.AddHook(remoting.SigningHook(c.credentials))
	}
}
