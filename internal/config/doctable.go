package config

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// ClassTable renders a Markdown table classifying keys (RocketMQ's, in
// the given order) against dst: used when dst has a field for the key,
// else ignored with dst's reason, noting a value restriction.
func ClassTable(keys []string, dst any) (string, error) {
	fields, err := Keys(dst)
	if err != nil {
		return "", err
	}
	var ignored map[string]Ignored
	if ig, ok := dst.(Ignorer); ok {
		ignored = ig.IgnoredKeys()
	}
	var b strings.Builder
	b.WriteString("| key | raftmq | why |\n|---|---|---|\n")
	for _, k := range keys {
		ig, isIgnored := ignored[k]
		switch {
		case slices.Contains(fields, k):
			fmt.Fprintf(&b, "| `%s` | used | |\n", k)
		case isIgnored && ig.Only != "":
			fmt.Fprintf(&b, "| `%s` | ignored; only `%s` accepted | %s |\n", k, ig.Only, ig.Reason)
		case isIgnored && ig.OnlyEmpty:
			fmt.Fprintf(&b, "| `%s` | ignored; only empty accepted | %s |\n", k, ig.Reason)
		case isIgnored:
			fmt.Fprintf(&b, "| `%s` | ignored | %s |\n", k, ig.Reason)
		default:
			fmt.Fprintf(&b, "| `%s` | **unknown** | |\n", k)
		}
	}
	return b.String(), nil
}

// ReplaceSection replaces the text between the lines "<!-- begin NAME -->"
// and "<!-- end NAME -->" of the file at path with body.
func ReplaceSection(path, name, body string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin, end := "<!-- begin "+name+" -->\n", "<!-- end "+name+" -->"
	s := string(raw)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %q section", path, name)
	}
	return os.WriteFile(path, []byte(s[:i+len(begin)]+body+s[j:]), 0o644)
}
