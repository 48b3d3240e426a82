package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// mqadmin's plain ACL commands (RocketMQ 4.x tools/command/acl). Each
// change goes to every member of every targeted broker group — with -b,
// every member of that broker's group — because raftmq keeps one
// plain_acl.yml per member and the members of a group must agree
// (docs/adr/NNNN); clusterAclConfigVersion compares their content hashes.
// The requests are signed with --aclAccessKey/--aclSecretKey (or
// RAFTMQ_ACCESS_KEY/RAFTMQ_SECRET_KEY, or mqadmin's
// $ROCKETMQ_HOME/conf/tools.yml): brokers with aclEnable accept them from
// admin accounts only.

func init() {
	adminCommands = append(adminCommands, aclAdminCommands...)
}

var aclTargetFlags = []flagSpec{
	str("brokerAddr", "b", "every member of this broker's group"),
	str("clusterName", "c", "every member of every broker group of this cluster"),
}

var aclAdminCommands = []adminEntry{
	adminCommand[[]string]{
		name:  "updateAclConfig",
		short: "Create or update an ACL account in plain_acl.yml on every member of a broker group (-b) or cluster (-c)",
		flags: append([]flagSpec{
			str("accessKey", "a", "account's access key (at least 7 characters)").req(),
			str("secretKey", "s", "account's secret key (at least 7 characters; required for a new account)"),
			str("whiteRemoteAddress", "w", "addresses that need no signature, e.g. 192.168.1.*"),
			str("defaultTopicPerm", "i", "DENY, PUB, SUB or PUB|SUB for topics not listed"),
			str("defaultGroupPerm", "u", "DENY, PUB, SUB or PUB|SUB for groups not listed"),
			str("topicPerms", "t", "topic permissions, e.g. topicA=DENY,topicD=SUB"),
			str("groupPerms", "g", "group permissions, e.g. groupA=DENY,groupD=SUB"),
			yesNo("admin", "m", false, "admin account: true or false"),
		}, aclTargetFlags...),
		oneOf: []string{"brokerAddr", "clusterName"},
		run: func(ctx context.Context, s *adminSession, in flagValues) ([]string, error) {
			return s.aclEach(ctx, in, remoting.RequestUpdateACLConfig, aclUpdateHeader(in))
		},
		table: func(w *tabwriter.Writer, addrs []string) {
			for _, a := range addrs {
				fmt.Fprintf(w, "create or update plain access config to %s success.\n", a)
			}
		},
	},
	adminCommand[[]string]{
		name:  "deleteAclConfig",
		short: "Delete an ACL account from plain_acl.yml on every member of a broker group (-b) or cluster (-c)",
		flags: append([]flagSpec{str("accessKey", "a", "account to delete").req()}, aclTargetFlags...),
		oneOf: []string{"brokerAddr", "clusterName"},
		run: func(ctx context.Context, s *adminSession, in flagValues) ([]string, error) {
			h := wire.DeleteAccessConfigRequestHeader{AccessKey: in.str("accessKey")}
			return s.aclEach(ctx, in, remoting.RequestDeleteACLConfig, &h)
		},
		table: func(w *tabwriter.Writer, addrs []string) {
			for _, a := range addrs {
				fmt.Fprintf(w, "delete plain access config account from %s success.\n", a)
			}
		},
	},
	adminCommand[[]string]{
		name:  "updateGlobalWhiteAddr",
		short: "Replace plain_acl.yml's globalWhiteRemoteAddresses on every member of a broker group (-b) or cluster (-c)",
		flags: append([]flagSpec{
			str("globalWhiteRemoteAddresses", "g", "addresses that need no signature, e.g. 10.10.103.*,192.168.0.*").req(),
			str("aclFileFullPath", "p", "the broker's ACL file (optional; must be the broker's aclFile)"),
		}, aclTargetFlags...),
		oneOf: []string{"brokerAddr", "clusterName"},
		run: func(ctx context.Context, s *adminSession, in flagValues) ([]string, error) {
			h := wire.UpdateGlobalWhiteAddrsConfigRequestHeader{GlobalWhiteAddrs: in.str("globalWhiteRemoteAddresses"), AclFileFullPath: in.str("aclFileFullPath")}
			return s.aclEach(ctx, in, remoting.RequestUpdateGlobalWhiteAddrs, &h)
		},
		table: func(w *tabwriter.Writer, addrs []string) {
			for _, a := range addrs {
				fmt.Fprintf(w, "update global white remote addresses to %s success.\n", a)
			}
		},
	},
	adminCommand[[]aclVersion]{
		name: "clusterAclConfigVersion",
		short: "Show every member's plain_acl.yml version and content hash; exit 1 when members of a group disagree " +
			"(-b: that broker's group, -c: a cluster)",
		flags: aclTargetFlags,
		oneOf: []string{"brokerAddr", "clusterName"},
		run:   runACLVersions,
		table: columns([]any{"#Cluster Name", "#Broker Name", "#Broker Addr", "#AclEnable", "#AclFilesVersion", "#LastUpdateTime", "#Hash", "#Agree"},
			func(v aclVersion) []any {
				return []any{v.Cluster, v.BrokerName, v.BrokerAddr, v.AclEnable, v.Counter, v.LastUpdate, orDash(v.Hash), v.Agree}
			}),
	},
}

// aclUpdateHeader is updateAclConfig's request header
// (wire.CreateAccessConfigRequestHeader's fields). A field is sent when
// its value is not empty, and -w, -t and -g also when given empty, as
// mqadmin sends them: the broker then clears the account's white address
// or list, where a field left out keeps the stored one. The header
// struct's omitempty tags cannot say "given empty", so the header is a
// struct made for the fields sent.
func aclUpdateHeader(in flagValues) any {
	type field struct{ key, value string }
	fields := []field{{"accessKey", in.str("accessKey")}, {"admin", strconv.FormatBool(in.bool("admin"))}}
	for _, name := range []string{"secretKey", "whiteRemoteAddress", "defaultTopicPerm", "defaultGroupPerm", "topicPerms", "groupPerms"} {
		clears := name == "whiteRemoteAddress" || name == "topicPerms" || name == "groupPerms"
		if v := in.str(name); v != "" || (clears && in.given(name)) {
			fields = append(fields, field{name, v})
		}
	}
	sf := make([]reflect.StructField, len(fields))
	for i, f := range fields {
		sf[i] = reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: reflect.TypeFor[string](), Tag: reflect.StructTag(`ext:"` + f.key + `"`)}
	}
	h := reflect.New(reflect.StructOf(sf))
	for i, f := range fields {
		h.Elem().Field(i).SetString(f.value)
	}
	return h.Interface()
}

// aclVersion is one member's answer to GET_BROKER_CLUSTER_ACL_INFO.
type aclVersion struct {
	Cluster    string `json:"clusterName"`
	BrokerName string `json:"brokerName"`
	BrokerAddr string `json:"brokerAddr"`
	AclEnable  bool   `json:"aclEnable"`
	Counter    int64  `json:"counter"`
	LastUpdate string `json:"lastUpdateTime"`
	Hash       string `json:"hash"`
	// Agree: every member of the group has the same ACL state.
	Agree bool `json:"agree"`
}

// errACLDisagree is members of a group with different ACL rules.
var errACLDisagree = errors.New("admin: broker group members have different ACL rules")

// aclMember is one member of a targeted group.
type aclMember struct{ cluster, brokerName, addr string }

// aclMembers lists every member of the groups -b or -c names.
func (s *adminSession) aclMembers(ctx context.Context, in flagValues) ([]aclMember, error) {
	ci, err := s.a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	clusterOf := map[string]string{}
	for c, names := range ci.ClusterAddrTable {
		for _, n := range names {
			clusterOf[n] = c
		}
	}
	var names []string
	if c := in.str("clusterName"); c != "" {
		var ok bool
		if names, ok = ci.ClusterAddrTable[c]; !ok {
			return nil, fmt.Errorf("%w: cluster %q is unknown (clusters: %v)", errAdminUsage, c, slices.Sorted(maps.Keys(ci.ClusterAddrTable)))
		}
	} else {
		addr := in.str("brokerAddr")
		for n, bd := range ci.BrokerAddrTable {
			if slices.Contains(slices.Collect(maps.Values(bd.BrokerAddrs)), addr) {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%w: broker %s is not registered with the name server (`raftmq admin clusterList` lists brokers)", errAdminUsage, addr)
		}
	}
	sort.Strings(names)
	var out []aclMember
	for _, n := range names {
		bd := ci.BrokerAddrTable[n]
		for _, id := range slices.Sorted(maps.Keys(bd.BrokerAddrs)) {
			out = append(out, aclMember{cluster: clusterOf[n], brokerName: n, addr: bd.BrokerAddrs[id]})
		}
	}
	return out, nil
}

// aclEach sends one request to every targeted member and returns the
// addresses that accepted it; the refusals are the error. Each member
// keeps its own file, so the request is bound to the member's address,
// as mqadmin sends it to each master and slave.
func (s *adminSession) aclEach(ctx context.Context, in flagValues, code int16, header any) ([]string, error) {
	members, err := s.aclMembers(ctx, in)
	if err != nil {
		return nil, err
	}
	var done []string
	var errs []error
	for _, m := range members {
		if _, err := s.memberRequest(ctx, m.addr, code, header); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, m.addr)
	}
	if len(errs) > 0 {
		return done, partialFailure{fmt.Errorf("%d of %d members refused or failed (run clusterAclConfigVersion to see which disagree): %w",
			len(errs), len(members), errors.Join(errs...))}
	}
	return done, nil
}

// runACLVersions is mqadmin clusterAclConfigVersion, over every member.
func runACLVersions(ctx context.Context, s *adminSession, in flagValues) ([]aclVersion, error) {
	members, err := s.aclMembers(ctx, in)
	if err != nil {
		return nil, err
	}
	var out []aclVersion
	var errs []error
	for _, m := range members {
		resp, err := s.memberRequest(ctx, m.addr, remoting.RequestGetBrokerACLInfo, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var h wire.GetBrokerAclConfigResponseHeader
		if err := resp.DecodeHeader(&h); err != nil {
			errs = append(errs, fmt.Errorf("broker %s: %w", m.addr, err))
			continue
		}
		v := aclVersion{Cluster: m.cluster, BrokerName: m.brokerName, BrokerAddr: m.addr, AclEnable: h.AclEnable, Hash: h.AclHash, LastUpdate: "-"}
		var dv wire.DataVersion
		if h.Version != "" && json.Unmarshal([]byte(h.Version), &dv) == nil {
			v.Counter = dv.Counter
			if dv.Timestamp > 0 {
				v.LastUpdate = fmtTime(time.UnixMilli(dv.Timestamp))
			}
		}
		out = append(out, v)
	}
	// A group agrees when every member answered with the same state.
	var disagree []string
	for i := range out {
		out[i].Agree = true
		for _, o := range out {
			if o.BrokerName == out[i].BrokerName && (o.Hash != out[i].Hash || o.AclEnable != out[i].AclEnable) {
				out[i].Agree = false
			}
		}
		if !out[i].Agree && !slices.Contains(disagree, out[i].BrokerName) {
			disagree = append(disagree, out[i].BrokerName)
		}
	}
	if len(disagree) > 0 {
		errs = append(errs, fmt.Errorf("%w: %v — make their plain_acl.yml identical (updateAclConfig -c sends a change to every member)", errACLDisagree, disagree))
	}
	if len(errs) > 0 {
		return out, partialFailure{errors.Join(errs...)}
	}
	return out, nil
}

// aclFlags are the signing flags of admin and bench: every request is
// signed when an access key is given (brokers with aclEnable refuse
// unsigned ones). Environment variables keep the secret out of the
// process list.
type aclFlags struct {
	accessKey, secretKey string
}

// The flags' defaults stay empty and the variables are read by
// credentials: a default taken from the environment would be printed by
// every --help and usage text, the secret key included.
func (f *aclFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.accessKey, "aclAccessKey", "",
		"ACL access key to sign requests with (default $RAFTMQ_ACCESS_KEY)")
	fs.StringVar(&f.secretKey, "aclSecretKey", "",
		"ACL secret key (default $RAFTMQ_SECRET_KEY; prefer the variable: flags show in ps)")
}

// credentials are the signing keys given — by the flags, else the
// environment (each key on its own), else, as mqadmin reads them,
// $ROCKETMQ_HOME/conf/tools.yml (accessKey, secretKey) — zero when none.
func (f *aclFlags) credentials() (remoting.Credentials, error) {
	cr := remoting.Credentials{AccessKey: f.accessKey, SecretKey: f.secretKey}
	if cr.AccessKey == "" {
		cr.AccessKey = os.Getenv("RAFTMQ_ACCESS_KEY")
	}
	if cr.SecretKey == "" {
		cr.SecretKey = os.Getenv("RAFTMQ_SECRET_KEY")
	}
	if cr.IsZero() {
		if home := os.Getenv("ROCKETMQ_HOME"); home != "" {
			path := filepath.Join(home, "conf", "tools.yml")
			data, err := os.ReadFile(path)
			switch {
			case err == nil:
				var tools struct {
					AccessKey string `yaml:"accessKey"`
					SecretKey string `yaml:"secretKey"`
				}
				if err := yaml.Unmarshal(data, &tools); err != nil {
					return cr, fmt.Errorf("%s: %v", path, err)
				}
				cr.AccessKey, cr.SecretKey = tools.AccessKey, tools.SecretKey
			case !errors.Is(err, fs.ErrNotExist):
				return cr, err
			}
		}
	}
	if (cr.AccessKey == "") != (cr.SecretKey == "") {
		return cr, errors.New("--aclAccessKey and --aclSecretKey (or RAFTMQ_ACCESS_KEY and RAFTMQ_SECRET_KEY) go together")
	}
	return cr, nil
}

// credentials are the session's signing keys (aclFlags.credentials); a
// bad pair or tools.yml is a usage error.
func (f *adminFlags) credentials() (remoting.Credentials, error) {
	cr, err := f.acl.credentials()
	if err != nil {
		return cr, fmt.Errorf("%w: %v", errAdminUsage, err)
	}
	return cr, nil
}
