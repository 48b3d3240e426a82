package wire

import (
	"encoding/json"
	"sort"
)

// JSON for routes and cluster info is written by hand because RocketMQ's
// fastjson default writes Map<Long,String> keys unquoted
// ({0:"127.0.0.1:10911"}), which encoding/json can neither produce nor read.
// Old clients (request version < V4_9_4) get exactly that legacy form; newer
// ones, or any request with acceptStandardJsonOnly=true, get standard JSON.
// Fields are written in alphabetical order, as fastjson does. Decoders accept
// both forms by quoting legacy keys first.

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // marshalling a string cannot fail
	return append(b, q...)
}

func appendJSONStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

func sortedStringKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// QuoteLegacyKeys rewrites fastjson's unquoted numeric object keys
// ({0:"a"}) as standard JSON ({"0":"a"}); standard input comes back
// unchanged. It tracks only what it must: whether it is inside a string and
// whether the next token in the current object is a key.
func QuoteLegacyKeys(in []byte) []byte {
	out := make([]byte, 0, len(in)+16)
	var stack []byte // '{' or '[' per open container
	expectKey := false
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c == '"':
			// Copy the whole string, honouring escapes.
			j := i + 1
			for j < len(in) && in[j] != '"' {
				if in[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(in) {
				return append(out, in[i:]...)
			}
			out = append(out, in[i:j+1]...)
			i = j
			expectKey = false
			continue
		case c == '{':
			stack = append(stack, c)
			expectKey = true
		case c == '[':
			stack = append(stack, c)
			expectKey = false
		case c == '}' || c == ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			expectKey = false
		case c == ',':
			expectKey = len(stack) > 0 && stack[len(stack)-1] == '{'
		case c == ':':
			expectKey = false
		case expectKey && (c == '-' || (c >= '0' && c <= '9')):
			j := i + 1
			for j < len(in) && in[j] >= '0' && in[j] <= '9' {
				j++
			}
			out = append(out, '"')
			out = append(out, in[i:j]...)
			out = append(out, '"')
			i = j - 1
			expectKey = false
			continue
		}
		out = append(out, c)
	}
	return out
}
