package remoting

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
)

// Request signatures of RocketMQ's plain ACL (AclClientRPCHook on the
// client, PlainAccessValidator on the broker): the client adds its access
// key (and optional security token) to the extFields, then signs
//
//	HmacSHA1(secretKey, concat(values of extFields sorted by key, Signature excluded) + body)
//
// base64 (standard alphabet, padded) into the Signature field. Only the
// values are concatenated, never the keys; keys sort by Java's
// String.compareTo, which for the ASCII keys of headers is byte order.

// Extension fields of a signed request.
const (
	ExtAccessKey     = "AccessKey"     // SessionCredentials.ACCESS_KEY
	ExtSignature     = "Signature"     // SessionCredentials.SIGNATURE
	ExtSecurityToken = "SecurityToken" // SessionCredentials.SECURITY_TOKEN
	// ExtUniqueKeyQuery is MixAll.UNIQUE_MSG_QUERY_FLAG: RocketMQ's broker
	// leaves it out of the signed content although clients sign it, so
	// verification tries both.
	ExtUniqueKeyQuery = "_UNIQUE_KEY_QUERY"
)

// Credentials are an ACL account's keys; a client signs every request
// with them (RocketMQ's SessionCredentials).
type Credentials struct {
	AccessKey     string
	SecretKey     string
	SecurityToken string // optional; sent and signed when set
}

// MinKeyLength is the shortest access or secret key taken: RocketMQ
// refuses keys of 6 characters or fewer (AclConstants.ACCESS_KEY_MIN_LENGTH,
// checked with <=). A secret shorter still could be found offline from one
// signed request seen on the wire.
const MinKeyLength = 7

// CheckConfigured reports what is wrong with a pair set in a conf file
// (nil for none or a whole, long enough pair); the key names are the
// file's.
func (c Credentials) CheckConfigured(accessKeyName, secretKeyName string) error {
	switch {
	case (c.AccessKey == "") != (c.SecretKey == ""):
		return fmt.Errorf("%s and %s go together", accessKeyName, secretKeyName)
	case c.AccessKey != "" && (len(c.AccessKey) < MinKeyLength || len(c.SecretKey) < MinKeyLength):
		return fmt.Errorf("%s and %s must be at least %d characters each", accessKeyName, secretKeyName, MinKeyLength)
	}
	return nil
}

// IsZero reports whether no credentials are set.
func (c Credentials) IsZero() bool { return c.AccessKey == "" && c.SecretKey == "" }

// ExtPair is one extFields entry.
type ExtPair struct{ Key, Value string }

// ExtPairs returns req's extFields — those of its ExtAppender first, then
// ExtFields (or the raw block of a lazily decoded command) — sorted by key.
// A key present twice keeps its last value, as a map would.
func ExtPairs(req *RemotingCommand) []ExtPair {
	pairs := make([]ExtPair, 0, len(req.ExtFields)+16)
	if req.ExtAppender != nil {
		w := ExtWriter{}
		req.ExtAppender.AppendExt(&w)
		if w.err == nil {
			rangeRawExt(string(w.b), func(k, v string) bool {
				pairs = append(pairs, ExtPair{k, v})
				return true
			})
		}
	}
	req.RangeExt(func(k, v string) bool {
		pairs = append(pairs, ExtPair{k, v})
		return true
	})
	slices.SortStableFunc(pairs, func(a, b ExtPair) int { return strings.Compare(a.Key, b.Key) })
	// Keep the last of equal keys.
	out := pairs[:0]
	for i, p := range pairs {
		if i+1 < len(pairs) && pairs[i+1].Key == p.Key {
			continue
		}
		out = append(out, p)
	}
	return out
}

// SignatureContent appends to dst the bytes a signature covers: the values
// of pairs (sorted by key, as ExtPairs returns them) whose key skip does
// not reject, then body. Signature itself is always skipped.
func SignatureContent(dst []byte, pairs []ExtPair, body []byte, skip func(key string) bool) []byte {
	for _, p := range pairs {
		if p.Key == ExtSignature || (skip != nil && skip(p.Key)) {
			continue
		}
		dst = append(dst, p.Value...)
	}
	return append(dst, body...)
}

// Signature is base64(HmacSHA1(secretKey, content)), RocketMQ's AclSigner.
func Signature(content []byte, secretKey string) string {
	m := hmac.New(sha1.New, []byte(secretKey))
	m.Write(content)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// SignatureEqual compares two signatures in constant time.
func SignatureEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// Sign adds AccessKey, SecurityToken (when set) and Signature to req's
// ExtFields as RocketMQ's AclClientRPCHook does. Fields written by an
// ExtAppender are signed too; the appender is left in place (it writes
// the same fields each time), so a command may be signed again before a
// retry.
func (c Credentials) Sign(req *RemotingCommand) {
	if req.ExtFields == nil {
		if req.extLazy {
			req.ExtFields = map[string]string{}
			req.RangeExt(func(k, v string) bool { req.ExtFields[k] = v; return true })
			req.extLazy, req.extRaw = false, ""
		} else {
			req.ExtFields = map[string]string{}
		}
	}
	req.ExtFields[ExtAccessKey] = c.AccessKey
	if c.SecurityToken != "" {
		req.ExtFields[ExtSecurityToken] = c.SecurityToken
	}
	delete(req.ExtFields, ExtSignature)
	content := SignatureContent(nil, ExtPairs(req), req.Body, nil)
	req.ExtFields[ExtSignature] = Signature(content, c.SecretKey)
}

// SigningHook is an RPCHook that signs every request a Client sends with
// creds (RocketMQ's AclClientRPCHook).
func SigningHook(creds Credentials) RPCHook { return signingHook{creds} }

type signingHook struct{ c Credentials }

func (h signingHook) BeforeRequest(_ string, req *RemotingCommand) {
	if !req.IsResponse() {
		h.c.Sign(req)
	}
}

func (h signingHook) AfterResponse(string, *RemotingCommand, *RemotingCommand) {}

// VerifySignature reports whether req carries a valid signature by
// secretKey. Besides RocketMQ's broker-side content (all fields but
// Signature and _UNIQUE_KEY_QUERY) it accepts the two contents that
// deployed clients actually sign: with _UNIQUE_KEY_QUERY (the Java client
// signs it) and without SecurityToken (the Go client's ACLInterceptor puts
// the token in the request but not in the signed content).
func VerifySignature(req *RemotingCommand, pairs []ExtPair, secretKey string) bool {
	got, _ := req.ExtValue(ExtSignature)
	if got == "" {
		for _, p := range pairs {
			if p.Key == ExtSignature {
				got = p.Value
			}
		}
	}
	if got == "" {
		return false
	}
	var hasUnique, hasToken bool
	for _, p := range pairs {
		hasUnique = hasUnique || p.Key == ExtUniqueKeyQuery
		hasToken = hasToken || p.Key == ExtSecurityToken
	}
	n := len(req.Body)
	for _, p := range pairs {
		n += len(p.Value)
	}
	buf := make([]byte, 0, n)
	try := func(skip func(string) bool) bool {
		return SignatureEqual(Signature(SignatureContent(buf[:0], pairs, req.Body, skip), secretKey), got)
	}
	if try(func(k string) bool { return k == ExtUniqueKeyQuery }) {
		return true
	}
	if hasUnique && try(nil) {
		return true
	}
	if hasToken && try(func(k string) bool { return k == ExtSecurityToken || k == ExtUniqueKeyQuery }) {
		return true
	}
	return hasToken && hasUnique && try(func(k string) bool { return k == ExtSecurityToken })
}
