package filter

import (
	"slices"
	"testing"
)

// testMessages are the property sets the grammar table runs against;
// tests name a message by its index. Values are strings, as a message's
// properties are; TAGS is the tag.
var testMessages = []map[string]string{
	0:  {},
	1:  {"a": "5"},
	2:  {"a": "10", "b": "20"},
	3:  {"a": "20", "b": "10"},
	4:  {"a": "3", "TAGS": "TagA"},
	5:  {"a": "7", "TAGS": "TagB"},
	6:  {"a": "abc", "TAGS": "TagA"},
	7:  {"a": "5.0", "TAGS": "TagC"},
	8:  {"a": "-3", "b": "x"},
	9:  {"a": "", "b": ""},
	10: {"a": "true"},
	11: {"b": "5"},
	12: {"a": "2147483648"},
	13: {"name": "it's", "TAGS": "TagA"},
	14: {"a": "1e3"},
	15: {"a": "100", "b": "0", "TAGS": "TagB"},
	16: {"a": " 5"},
	17: {"a": "6", "region": "EU", "TAGS": "TagA"},
	18: {"a": "NaN"},
	19: {"a": "5", "b": "5", "TAGS": "TagB"},
}

func lookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func matchSet(t *testing.T, x *Expr) []int {
	t.Helper()
	got := []int{}
	for i, m := range testMessages {
		if x.Match(lookup(m)) {
			got = append(got, i)
		}
	}
	return got
}

// grammarCases pairs an expression with exactly the messages of
// testMessages it selects. The sets were checked against RocketMQ 4.9.8's
// own SelectorParser and evaluator (ExpressionMessageFilter semantics: a
// message matches when the result is TRUE; null and exceptions filter it
// out).
var grammarCases = []struct {
	expr string
	want []int
}{
	// A property compared with an integer literal is parsed with
	// Integer.valueOf: "5.0", " 5", "abc", "2147483648" and "1e3" throw,
	// which filters the message out.
	{"a = 5", []int{1, 19}},
	{"a = 5L", []int{1, 19}}, // 5L is the same Integer
	{"a = '5'", []int{1, 19}},
	// With a float literal Double.valueOf is used: it trims, reads "5.0".
	{"a = 5.0", []int{1, 7, 16, 19}},
	{"a > 5", []int{2, 3, 5, 15, 17}},
	{"a >= 5", []int{1, 2, 3, 5, 15, 17, 19}},
	{"a < 5", []int{4, 8}},
	{"a <= 5", []int{1, 4, 8, 19}},
	{"a <> 5", []int{2, 3, 4, 5, 8, 15, 17}},
	{"a <> '5'", []int{2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 15, 16, 17, 18}},
	{"a > -1", []int{1, 2, 3, 4, 5, 15, 17, 19}},
	// "NaN" reads as a double that sorts above every number (Double.compare).
	{"a >= 0.5", []int{1, 2, 3, 4, 5, 7, 12, 14, 15, 16, 17, 18, 19}},
	{"a > 1000", []int{}},                         // "2147483648" is not an Integer: it throws
	{"a > 1000.5", []int{12, 18}},                 // as a double it reads; NaN is above all
	{"a > 2147483647", []int{}},                   // still an Integer literal
	{"a >= 2147483648", []int{12}},                // a Long literal: Long.valueOf reads it
	{"a = 1e3", []int{14}},                        // a double literal reads "1e3" as 1000
	{"a BETWEEN 3 AND 7", []int{1, 4, 5, 17, 19}}, // bounds are inclusive
	{"a NOT BETWEEN 3 AND 7", []int{2, 3, 8, 15}},
	{"a BETWEEN 7 AND 7", []int{5}},
	{"a BETWEEN -7 AND -1", []int{8}},
	{"a BETWEEN 0 AND 1E3", []int{1, 2, 3, 4, 5, 15, 17, 19}},
	// TAGS is the message tag; property names are case-sensitive.
	{"TAGS = 'TagA'", []int{4, 6, 13, 17}},
	{"TAGS <> 'TagB'", []int{4, 6, 7, 13, 17}}, // untagged messages: null, not TRUE
	{"tags = 'TagA'", []int{}},
	{"TAGS IN ('TagA', 'TagB')", []int{4, 5, 6, 13, 15, 17, 19}},
	{"TAGS NOT IN ('TagA', 'TagB')", []int{7}},
	// IN compares strings: numbers are written as strings and not parsed.
	{"a IN ('5', '10')", []int{1, 2, 19}},
	{"a NOT IN ('5')", []int{2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 15, 16, 17, 18}},
	{"NOT (a NOT IN ('5'))", []int{1, 19}},
	{"a IN ('')", []int{9}},
	{"a = ''", []int{9}},
	{"a IS NULL", []int{0, 11, 13}},
	{"a IS NOT NULL", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 15, 16, 17, 18, 19}},
	{"a IS NULL OR a = '5'", []int{0, 1, 11, 13, 19}},
	{"b IS NOT NULL AND b = '5'", []int{11, 19}},
	// NOT of null is null: messages without a are never selected.
	{"NOT (a = '5')", []int{2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 15, 16, 17, 18}},
	{"NOT (a > 5)", []int{1, 4, 8, 19}},
	// NOT binds tighter than '=': this is (NOT a) = '5', a boolean
	// compared with a string, which throws.
	{"NOT a = '5'", []int{}},
	{"NOT (a = 5 OR b = 5)", []int{2, 3, 15}},
	// An error anywhere aborts the whole expression, so evaluation order
	// matters: OR stops at its first TRUE.
	{"a > 5 OR TAGS = 'TagA'", []int{2, 3, 4, 5, 13, 15, 17}},
	{"TAGS = 'TagA' OR a > 5", []int{2, 3, 4, 5, 6, 13, 15, 17}},
	{"a >= 5 AND TAGS <> 'TagB'", []int{17}},
	// AND binds tighter than OR.
	{"a = 5 OR a = 10 AND b = 20", []int{1, 2, 19}},
	{"(a = 5 OR a = 10) AND b = 20", []int{2}},
	{"a = 5 AND b IS NULL", []int{1}},
	{"a <> 5 OR a IS NULL", []int{0, 2, 3, 4, 5, 8, 11, 13, 15, 17}},
	{"a > 5 AND a < 3", []int{}},
	// Two properties: ordered as doubles, equal as strings; two missing
	// properties are equal (null = null is TRUE in RocketMQ).
	{"a > b", []int{3, 15}},
	{"a = b", []int{0, 9, 13, 19}},
	{"a <> b", []int{1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 15, 16, 17, 18}},
	{"(a > 5) = (b > 5)", []int{0, 2, 3, 13, 19}},
	// '' is one quote inside a string.
	{"name = 'it''s'", []int{13}},
	{"name = 'it''''s'", []int{}},
	// A string compared with a boolean is Boolean.valueOf: only "true"
	// (any case) is TRUE, every other value equals FALSE.
	{"a = TRUE", []int{10}},
	{"a = FALSE", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 14, 15, 16, 17, 18, 19}},
	{"TRUE", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
	{"5 = 5", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
	{"FALSE", []int{}},
	{"NULL", []int{}},
	{"NOT NULL", []int{}},
	// A bare property is a boolean cast: a string is not a Boolean, so it
	// reads FALSE when set (and NOT a selects every message that has a).
	{"a", []int{}},
	{"NOT a", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 15, 16, 17, 18, 19}},
	{"-a < 0", []int{}}, // negating a string gives null
	{"region = 'EU' AND (TAGS = 'TagA' OR TAGS = 'TagB')", []int{17}},
	{"/* comment */ a = 5 -- why\n", []int{1, 19}},
	// Keywords in any case; property names as written.
	{"a BeTwEeN 3 aNd 7 oR TAGS iS nOt NuLl", []int{1, 4, 5, 13, 15, 17, 19}},
	{"A = 5 OR Tags IS NOT NULL", []int{}},
}

func TestGrammarMatchSets(t *testing.T) {
	for _, tc := range grammarCases {
		x, err := Compile(tc.expr)
		if err != nil {
			t.Errorf("Compile(%q): %v", tc.expr, err)
			continue
		}
		if got := matchSet(t, x); !slices.Equal(got, tc.want) {
			t.Errorf("%q selects %v, want %v", tc.expr, got, tc.want)
		}
		// The canonical form selects the same messages.
		y, err := Compile(x.String())
		if err != nil {
			t.Errorf("Compile(%q) (String of %q): %v", x.String(), tc.expr, err)
			continue
		}
		if got := matchSet(t, y); !slices.Equal(got, tc.want) {
			t.Errorf("%q (String of %q) selects %v, want %v", x.String(), tc.expr, got, tc.want)
		}
	}
}
