package acl

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/raftmq/raftmq/remoting"
)

// File is plain_acl.yml as RocketMQ 4.9 writes it (AclConstants' keys).
type File struct {
	GlobalWhiteRemoteAddresses []string      `yaml:"globalWhiteRemoteAddresses,omitempty"`
	Accounts                   []Account     `yaml:"accounts,omitempty"`
	DataVersion                []DataVersion `yaml:"dataVersion,omitempty"`
}

// Account is one entry of accounts (PlainAccessConfig).
type Account struct {
	AccessKey          string   `yaml:"accessKey"`
	SecretKey          string   `yaml:"secretKey"`
	WhiteRemoteAddress string   `yaml:"whiteRemoteAddress,omitempty"`
	Admin              bool     `yaml:"admin"`
	DefaultTopicPerm   string   `yaml:"defaultTopicPerm,omitempty"`
	DefaultGroupPerm   string   `yaml:"defaultGroupPerm,omitempty"`
	TopicPerms         []string `yaml:"topicPerms,omitempty"`
	GroupPerms         []string `yaml:"groupPerms,omitempty"`
}

// DataVersion is the file's version (RocketMQ's DataVersion: bumped by
// every update made through the admin commands).
type DataVersion struct {
	Counter   int64 `yaml:"counter" json:"counter"`
	Timestamp int64 `yaml:"timestamp" json:"timestamp"`
}

// maxFileSize bounds what Parse reads: a plain_acl.yml of a few thousand
// accounts is well below it.
const maxFileSize = 4 << 20

// RetryTopicPrefix is MixAll.RETRY_GROUP_TOPIC_PREFIX: group permissions
// are kept under the group's retry topic, as RocketMQ keeps them.
const RetryTopicPrefix = "%RETRY%"

// ParseFile decodes plain_acl.yml. Unknown keys are errors (a misspelt
// "topicPerm" would otherwise silently grant nothing), and so are a file
// with no YAML document (errNoRules) and one with more than one (the
// later ones would be ignored; RocketMQ's snakeyaml refuses such a file).
func ParseFile(data []byte) (*File, error) {
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidConfig, len(data), maxFileSize)
	}
	docs := yaml.NewDecoder(bytes.NewReader(data))
	var doc, next yaml.Node
	switch err := docs.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, errNoRules
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	case !errors.Is(docs.Decode(&next), io.EOF):
		return nil, fmt.Errorf("%w: more than one YAML document (a line '---' starts another); the file holds one", ErrInvalidConfig)
	case len(doc.Content) == 0 || doc.Content[0].Tag == "!!null":
		return nil, errNoRules
	}
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return &f, nil
}

// errNoRules refuses a file with no YAML document. That is what a file
// being rewritten in place (truncated, then written) looks like to the
// poller, and taken for rules it would refuse every client, the admin
// account included, until the next change; a file that really lists no
// account says so ("accounts: []").
var errNoRules = fmt.Errorf("%w: the file holds no rules (it is empty, only comments, or null); "+
	"a file that lets no account in is written \"accounts: []\"", ErrInvalidConfig)

// Marshal encodes f as YAML (comments of the original file are not kept,
// as RocketMQ's snakeyaml rewrite does not keep them either).
func (f *File) Marshal() ([]byte, error) { return yaml.Marshal(f) }

// Rules are a compiled plain_acl.yml: what requests are checked against.
// A Rules value is immutable.
type Rules struct {
	global   []*addrMatcher
	accounts map[string]*account
	// Version is the file's dataVersion (zero when it has none).
	Version DataVersion
	// Hash identifies the rules (sha256 of the file's accounts and white
	// addresses re-encoded, hex, first 16 digits): members of a broker
	// group agree when their hashes do.
	Hash string
	// Accounts is the number of accounts.
	Accounts int
}

type account struct {
	accessKey string
	secret    string
	admin     bool
	white     *addrMatcher
	defTopic  Perm
	defGroup  Perm
	perms     map[string]Perm // topic or %RETRY%group → permission
}

// Compile parses and checks plain_acl.yml. Every problem is reported,
// each naming the account or entry.
func Compile(data []byte) (*Rules, error) {
	f, err := ParseFile(data)
	if err != nil {
		return nil, err
	}
	r, err := f.compile()
	if err != nil {
		return nil, err
	}
	// The hash covers the rules, not the file: comments, layout and the
	// dataVersion (whose timestamp differs between members changed by
	// the same command) leave it unchanged.
	canon := *f
	canon.DataVersion = nil
	out, err := canon.Marshal()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	sum := sha256.Sum256(out)
	r.Hash = hex.EncodeToString(sum[:8])
	return r, nil
}

func (f *File) compile() (*Rules, error) {
	r := &Rules{accounts: map[string]*account{}}
	var errs []error
	for _, g := range f.GlobalWhiteRemoteAddresses {
		m, err := compileAddr(g)
		if err != nil {
			errs = append(errs, fmt.Errorf("globalWhiteRemoteAddresses: %v", err))
			continue
		}
		r.global = append(r.global, m)
	}
	for i, a := range f.Accounts {
		acc, err := a.compile()
		if err != nil {
			errs = append(errs, fmt.Errorf("accounts[%d]: %v", i, err))
			continue
		}
		if _, dup := r.accounts[acc.accessKey]; dup {
			errs = append(errs, fmt.Errorf("accounts[%d]: accessKey %q is listed twice", i, acc.accessKey))
			continue
		}
		r.accounts[acc.accessKey] = acc
	}
	if len(f.DataVersion) > 0 {
		r.Version = f.DataVersion[0]
	}
	r.Accounts = len(r.accounts)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return r, nil
}

// Validate checks one account as an update would store it.
func (a Account) Validate() error {
	_, err := a.compile()
	return err
}

func (a Account) compile() (*account, error) {
	if len(a.AccessKey) < remoting.MinKeyLength || len(a.SecretKey) < remoting.MinKeyLength {
		return nil, fmt.Errorf("accessKey %q: accessKey and secretKey must be at least %d characters", a.AccessKey, remoting.MinKeyLength)
	}
	acc := &account{accessKey: a.AccessKey, secret: a.SecretKey, admin: a.Admin, perms: map[string]Perm{}}
	var err error
	if acc.white, err = compileAddr(a.WhiteRemoteAddress); err != nil {
		return nil, fmt.Errorf("accessKey %q: whiteRemoteAddress: %v", a.AccessKey, err)
	}
	if acc.defTopic, err = ParsePerm(a.DefaultTopicPerm); err != nil {
		return nil, fmt.Errorf("accessKey %q: defaultTopicPerm: %v", a.AccessKey, err)
	}
	if acc.defGroup, err = ParsePerm(a.DefaultGroupPerm); err != nil {
		return nil, fmt.Errorf("accessKey %q: defaultGroupPerm: %v", a.AccessKey, err)
	}
	for _, set := range []struct {
		what  string
		list  []string
		group bool
	}{{"topicPerms", a.TopicPerms, false}, {"groupPerms", a.GroupPerms, true}} {
		for _, e := range set.list {
			name, perm, ok := strings.Cut(e, "=")
			name = strings.TrimSpace(name)
			if !ok || name == "" || strings.Contains(perm, "=") {
				return nil, fmt.Errorf("accessKey %q: %s entry %q: want NAME=PERM, e.g. topicA=SUB", a.AccessKey, set.what, e)
			}
			p, err := ParsePerm(perm)
			if err != nil || strings.TrimSpace(perm) == "" {
				return nil, fmt.Errorf("accessKey %q: %s entry %q: want DENY, PUB, SUB or PUB|SUB after '='", a.AccessKey, set.what, e)
			}
			if set.group {
				name = RetryTopicPrefix + name
			}
			acc.perms[name] = p
		}
	}
	return acc, nil
}

// Resource is one permission a request needs: a topic, or a group as its
// retry topic (RetryTopicPrefix + group).
type Resource struct {
	Name string
	Perm Perm
}

// GroupResource is the resource of a consumer group.
func GroupResource(group string, p Perm) Resource {
	return Resource{Name: RetryTopicPrefix + group, Perm: p}
}

func (r Resource) String() string {
	if g, ok := strings.CutPrefix(r.Name, RetryTopicPrefix); ok {
		return "group:" + g
	}
	return "topic:" + r.Name
}

// Request is what a check needs of one request.
type Request struct {
	Code int16
	// Addr is the client's IP address.
	Addr netip.Addr
	// AccessKey is the request's AccessKey field.
	AccessKey string
	// Verify reports whether the request's signature is valid under a
	// secret key.
	Verify func(secretKey string) bool
	// Admin is set for requests only admin accounts may make.
	Admin bool
	// Resources are the topics and groups the request touches.
	Resources []Resource
}

// traceTopic is TopicValidator.RMQ_SYS_TRACE_TOPIC: RocketMQ lets any
// authenticated account publish message traces.
const traceTopic = "RMQ_SYS_TRACE_TOPIC"

// traceResource is a send of traces, allowed to every account.
var traceResource = Resource{Name: traceTopic, Perm: Pub}

// Check applies the rules in RocketMQ's order (PlainPermissionManager.
// validate): a global white address passes; then the account must exist;
// its own white address passes without a signature; then the signature,
// the admin flag, and each resource's permission (listed, else the
// account's default for topics or groups; an admin account that lists no
// resource may use every one; PUB on the trace topic is every account's).
// A refusal is a *Denied.
func (r *Rules) Check(q Request) error {
	for _, g := range r.global {
		if g.match(q.Addr) {
			return nil
		}
	}
	if q.AccessKey == "" {
		return &Denied{fmt.Sprintf("ACL: request code %d from %s has no AccessKey: sign requests with an account of plain_acl.yml (client credentials)", q.Code, q.Addr)}
	}
	acc, ok := r.accounts[q.AccessKey]
	if !ok {
		return &Denied{fmt.Sprintf("ACL: no account for accessKey=%s in plain_acl.yml", q.AccessKey)}
	}
	if acc.white.match(q.Addr) {
		return nil
	}
	if q.Verify == nil || !q.Verify(acc.secret) {
		return &Denied{fmt.Sprintf("ACL: signature check failed for accessKey=%s (wrong secretKey?)", q.AccessKey)}
	}
	if q.Admin && !acc.admin {
		return &Denied{fmt.Sprintf("ACL: request code %d needs an admin account; accessKey=%s is not admin", q.Code, q.AccessKey)}
	}
	if acc.admin && len(acc.perms) == 0 {
		return nil
	}
	for _, res := range q.Resources {
		// Every account may publish traces. RocketMQ skips the whole
		// check when a request needs PUB on the trace topic, which there
		// only a send of traces does; here a request may name it beside
		// resources checked on their own (an END_TRANSACTION's header
		// topic beside the half's real topic), so only that resource is
		// skipped, and never the admin check above.
		if res == traceResource {
			continue
		}
		owned, listed := acc.perms[res.Name]
		if !listed {
			owned = acc.defTopic
			if strings.HasPrefix(res.Name, RetryTopicPrefix) {
				owned = acc.defGroup
			}
		}
		if !owned.allows(res.Perm) {
			how := "default permission"
			if listed {
				how = "listed permission"
			}
			return &Denied{fmt.Sprintf("ACL: accessKey=%s has no %s permission on %s (%s %s)", q.AccessKey, res.Perm, res, how, owned)}
		}
	}
	return nil
}
