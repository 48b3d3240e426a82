package config

import (
	"errors"
	"strings"
	"testing"
)

// ignoringCfg is brokerCfg plus a few ignored keys.
type ignoringCfg struct{ Broker brokerCfg }

func (c *ignoringCfg) IgnoredKeys() map[string]Ignored {
	return map[string]Ignored{
		"brokerRole":    {Reason: "replication is Raft"},
		"haListenPort":  {Reason: "replication is Raft"},
		"serverThreads": {Reason: "Go schedules goroutines"},
		"aclEnable":     {Reason: "no ACL", Only: "false"},
		"pluginClass":   {Reason: "no plug-ins", OnlyEmpty: true},
	}
}

func TestLoadReportsIgnoredKeysInOneLine(t *testing.T) {
	p := writeConf(t, "haListenPort=10912\nbrokerRole=SLAVE\nserverThreads=4\naclEnable=FALSE\npluginClass=\nlistenPort=1\n")
	var c ignoringCfg
	rep, err := Load(p, &c)
	if err != nil {
		t.Fatal(err)
	}
	if c.Broker.ListenPort != 1 {
		t.Fatal("used key not applied")
	}
	want := p + ": 5 RocketMQ key(s) accepted but ignored: aclEnable (no ACL); brokerRole, haListenPort (replication is Raft); " +
		"pluginClass (no plug-ins); serverThreads (Go schedules goroutines)"
	if got := rep.Warning(); got != want {
		t.Fatalf("warning\n got %q\nwant %q", got, want)
	}
	if (Report{}).Warning() != "" {
		t.Fatal("no ignored keys: no warning")
	}
}

func TestRefusedValues(t *testing.T) {
	for _, kv := range []map[string]string{{"aclEnable": "true"}, {"pluginClass": "com.x.Store"}} {
		var c ignoringCfg
		_, err := Load(writeConf(t, func() string {
			for k, v := range kv {
				return k + "=" + v + "\n"
			}
			return ""
		}()), &c)
		if !errors.Is(err, ErrIgnoredKey) || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "accepted") {
			t.Errorf("%v: got %v", kv, err)
		}
	}
}

func TestApplyRefusesIgnoredKeys(t *testing.T) {
	var c ignoringCfg
	err := Apply(map[string]string{"brokerRole": "SLAVE"}, "UPDATE_BROKER_CONFIG", &c)
	if !errors.Is(err, ErrIgnoredKey) || !strings.Contains(err.Error(), "replication is Raft") {
		t.Fatalf("got %v", err)
	}
}

func TestSuggestions(t *testing.T) {
	cases := map[string]string{
		"brokerRol":              "brokerRole",
		"brokername":             "brokerName",
		"LISTENPORT":             "listenPort",
		"flushDiskTyp":           "flushDiskType",
		"autoCreateTopicEnabled": "autoCreateTopicEnable",
		"maxMessageSise":         "maxMessageSize",
		"zzz":                    "",
		"somethingElseEntirely":  "",
	}
	var c ignoringCfg
	for key, want := range cases {
		err := Apply(map[string]string{key: "1"}, "t", &c)
		var ke *KeyError
		if !errors.As(err, &ke) || !errors.Is(err, ErrUnknownKey) || ke.Suggest != want {
			t.Errorf("%s: suggestion %q, want %q (%v)", key, ke.Suggest, want, err)
		}
		if want != "" && !strings.Contains(err.Error(), `did you mean "`+want+`"?`) {
			t.Errorf("%s: message %q", key, err)
		}
	}
}

// TestEveryErrorInOneRun: all bad keys of a file in one error, sorted, and
// the good keys applied anyway.
func TestEveryErrorInOneRun(t *testing.T) {
	p := writeConf(t, "listenPort=ten\nbrokerNam=x\nbrokerName=ok\nbrokerId=-1\naclEnable=true\n")
	var c ignoringCfg
	_, err := Load(p, &c)
	probs := Problems(err)
	var keys []string
	for _, e := range probs {
		var ke *KeyError
		if !errors.As(e, &ke) {
			t.Fatalf("%v is not a KeyError", e)
		}
		keys = append(keys, ke.Key)
	}
	if got := strings.Join(keys, ","); got != "aclEnable,brokerId,brokerNam,listenPort" {
		t.Fatalf("problems %s: %v", got, err)
	}
	if c.Broker.BrokerName != "ok" {
		t.Fatal("good key not applied")
	}
	ex := Explain(p, err)
	if !strings.HasPrefix(ex.Error(), p+": 4 settings to change:\n  - ") || strings.Count(ex.Error(), "\n  - ") != 4 {
		t.Fatalf("explained: %v", ex)
	}
	if !errors.Is(ex, ErrBadValue) || !errors.Is(ex, ErrUnknownKey) {
		t.Fatal("Explain must keep the causes")
	}
	one := errors.New("one")
	if Explain(p, one) != one || Explain(p, nil) != nil {
		t.Fatal("a single problem or none is returned as it is")
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"brokerRole", "brokerRol", 1}, {"abc", "abc", 0}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("%q %q: %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

// FuzzApply: any key/value map is applied or refused with KeyErrors,
// never a panic, and every problem names a key of the map.
func FuzzApply(f *testing.F) {
	f.Add("listenPort", "10911", "brokerRol", "x")
	f.Add("aclEnable", "true", "flushIntervalCommitLog", "2s")
	f.Add("maxMessageSize", "99999999999", "", "")
	f.Add("pluginClass", "a.B", "diskMaxUsedSpaceRatio", "NaN")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		kv := map[string]string{k1: v1, k2: v2}
		var c ignoringCfg
		err := Apply(kv, "fuzz", &c)
		for _, e := range Problems(err) {
			var ke *KeyError
			if !errors.As(e, &ke) {
				t.Fatalf("%v is not a KeyError", e)
			}
			if _, ok := kv[ke.Key]; !ok {
				t.Fatalf("problem names %q, not a key of %v", ke.Key, kv)
			}
			_ = e.Error()
		}
	})
}
