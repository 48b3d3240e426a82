package filter

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
)

// compileErrors are expressions RocketMQ 4.9 rejects (and a few it
// accepts by ignoring trailing input, which Compile rejects), each with
// the exact error.
var compileErrors = []struct {
	expr, err string
}{
	{"", "sql92: at 1: empty expression: write a condition such as a > 5, or TRUE to select every message"},
	{"   ", "sql92: at 4: empty expression: write a condition such as a > 5, or TRUE to select every message"},
	{"a >=", "sql92: at 5: expected a value after '>=', found end of expression"},
	{"a = NULL", "sql92: at 3: NULL cannot be compared with '='; use IS NULL or IS NOT NULL"},
	{"a <> NULL", "sql92: at 3: NULL cannot be compared with '<>'; use IS NULL or IS NOT NULL"},
	{"NULL = a", "sql92: at 6: NULL cannot be compared with '='; use IS NULL or IS NOT NULL"},
	{"a > 'x'", "sql92: at 3: a string cannot be compared with '>'; only numbers and properties can (compare strings with = or IN)"},
	{"a > TRUE", "sql92: at 3: TRUE cannot be compared with '>'; only numbers and properties can (compare strings with = or IN)"},
	{"a BETWEEN 10 AND 1", "sql92: at 3: BETWEEN bounds out of order: 10 is greater than 1"},
	{"a BETWEEN 'a' AND 'z'", "sql92: at 3: a string cannot be compared with BETWEEN; only numbers and properties can (compare strings with = or IN)"},
	{"a BETWEEN 1 AND NULL", "sql92: at 3: NULL cannot be compared with BETWEEN; only numbers and properties can (compare strings with = or IN)"},
	{"a IN (5)", "sql92: at 7: expected a string in the IN list, found number 5 (IN compares strings only; quote it: '5')"},
	{"a IN ()", "sql92: at 7: expected a string in the IN list, found ')'"},
	{"a IN 'x'", "sql92: at 6: expected '(' after IN, found string 'x'"},
	{"5 IN ('5')", "sql92: at 3: IN needs a property on its left, found 5"},
	{"a = 'unterminated", "sql92: at 5: unterminated string: a string ends with ' (a quote inside is written '')"},
	{"a != 5", "sql92: at 3: unexpected character '!'; not equal is written <>"},
	{"a == 5", "sql92: at 4: expected a value after '=', found '='"},
	{"a = 5 b = 6", "sql92: at 7: unexpected property b after a complete condition; join conditions with AND or OR"},
	{"(a = 5", "sql92: at 7: expected ')' to close the '(' at 1, found end of expression"},
	{"a = 5)", "sql92: at 6: unexpected ')' after a complete condition; no '(' is open"},
	{"a AND", "sql92: at 6: expected a condition after AND, found end of expression"},
	{"a = 5 OR", "sql92: at 9: expected a condition after OR, found end of expression"},
	{"a = 0.0", "sql92: at 5: float 0.0 is zero or below the smallest positive double, which RocketMQ rejects; write 0"},
	{"a = 9223372036854775808", "sql92: at 5: integer 9223372036854775808 is out of range: the largest is 9223372036854775807"},
	{"a = 1e400", "sql92: at 5: number 1e400 is larger than the largest double"},
	{"TRUE = 5", "sql92: at 6: cannot compare TRUE with 5"},
	{"5", "sql92: at 1: expected a condition, found number 5 (compare it: a = 5, a IS NOT NULL)"},
	{"'x'", "sql92: at 1: expected a condition, found string 'x' (compare it: a = 5, a IS NOT NULL)"},
	{"a > 5 > 3", "sql92: at 7: a condition cannot be compared with '>'; only numbers and properties can (compare strings with = or IN)"},
	{"NOT a > 5", "sql92: at 7: NOT binds tighter than '>', so this compares the condition NOT a; write NOT (...) around the comparison"},
	{"a IS 5", "sql92: at 6: expected NULL after IS / IS NOT, found number 5"},
	{"a NOT LIKE 'x'", "sql92: at 7: expected BETWEEN or IN after NOT, found property LIKE; LIKE is not part of RocketMQ 4.9's SQL92 filter; compare whole values with = or IN"},
	{"a = 5 && b = 6", "sql92: at 7: unexpected character '&'; use AND / OR"},
	{"a = \"x\"", "sql92: at 5: unexpected character '\"'; strings are written in single quotes"},
	{"a.b = 1", "sql92: at 2: unexpected character '.'"},
	{"/* unterminated", "sql92: at 1: unterminated comment: '/*' needs a closing '*/'"},
	{"a = 0x10", "sql92: at 6: unexpected property x10 after a complete condition; hexadecimal numbers are not supported"},
	{"a CONTAINS 'x'", "sql92: at 3: unexpected property CONTAINS after a complete condition; CONTAINS is not part of RocketMQ 4.9's SQL92 filter; compare whole values with = or IN"},
	{"-a", "sql92: at 1: expected a condition, found -a (compare it: a = 5, a IS NOT NULL)"},
	{"a BETWEEN 1", "sql92: at 12: expected AND between the BETWEEN bounds, found end of expression"},
	{"a = -", "sql92: at 6: expected a value after '-', found end of expression"},
	{"a IN ('x', )", "sql92: at 12: expected a string in the IN list, found ')'"},
	{"a IN ('x' 'y')", "sql92: at 11: expected ',' or ')' in the IN list, found string 'y'"},
	{"TAGS = 'é' AND b ~ 1", "sql92: at 18: unexpected character '~'"},
	{"(a = 1) = 5 AND", "sql92: at 16: expected a condition after AND, found end of expression"},
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range compileErrors {
		x, err := Compile(tc.expr)
		if err == nil {
			t.Errorf("Compile(%q) = %q, want error %q", tc.expr, x, tc.err)
			continue
		}
		if err.Error() != tc.err {
			t.Errorf("Compile(%q) error\n got %q\nwant %q", tc.expr, err, tc.err)
		}
		var ce *CompileError
		if !errors.Is(err, ErrSyntax) || !errors.As(err, &ce) {
			t.Errorf("Compile(%q) error %v is not a *CompileError wrapping ErrSyntax", tc.expr, err)
		}
	}
}

// RocketMQ's parser stops at the first token that cannot continue the
// expression; Compile rejects such trailing input, except a final "--"
// comment without a line break, which RocketMQ ignores too.
func TestTrailingInput(t *testing.T) {
	if _, err := Compile("a = 1 b = 2"); !errors.Is(err, ErrSyntax) {
		t.Errorf("trailing condition: err = %v, want ErrSyntax", err)
	}
	x, err := Compile("a = 1 -- last line")
	if err != nil {
		t.Fatal(err)
	}
	if x.String() != "a = 1" {
		t.Errorf("String() = %q, want %q", x.String(), "a = 1")
	}
	// Without a line break ahead, "--" is two minus signs, as in RocketMQ.
	x, err = Compile("a = --5")
	if err != nil {
		t.Fatal(err)
	}
	if !x.MatchMap(map[string]string{"a": "5"}) {
		t.Errorf("a = --5 should select a = 5")
	}
	if _, err := Compile("a = --5\n"); err == nil {
		t.Errorf("a = --5 followed by a line break is a = and a comment: want an error")
	}
}

func TestLimits(t *testing.T) {
	long := "a = '" + strings.Repeat("x", MaxExprLen) + "'"
	_, err := Compile(long)
	if !errors.Is(err, ErrTooComplex) || err.Error() != "sql92: expression is 8198 bytes; the limit is 8192" {
		t.Errorf("long expression: %v", err)
	}
	ok := strings.Repeat("(", MaxDepth) + "a = 1" + strings.Repeat(")", MaxDepth)
	if _, err := Compile(ok); err != nil {
		t.Errorf("nesting %d: %v", MaxDepth, err)
	}
	for _, deep := range []string{
		strings.Repeat("(", MaxDepth+1) + "a = 1" + strings.Repeat(")", MaxDepth+1),
		strings.Repeat("NOT ", MaxDepth+1) + "a",
		"a = " + strings.Repeat("-", MaxDepth+1) + "1",
	} {
		_, err := Compile(deep)
		if !errors.Is(err, ErrTooComplex) || !strings.Contains(err.Error(), "nesting deeper than 100 levels") {
			t.Errorf("Compile(%.20q...): %v", deep, err)
		}
	}
	// Long flat chains are not nesting: they are built iteratively and fit
	// the length limit.
	chain := "a = 1" + strings.Repeat(" OR a = 1", (MaxExprLen-5)/9)
	if _, err := Compile(chain); err != nil {
		t.Errorf("flat chain of %d bytes: %v", len(chain), err)
	}
}

func TestEvaluate(t *testing.T) {
	cases := []struct {
		expr  string
		props map[string]string
		want  Result
		err   string
	}{
		{"a = 5", map[string]string{"a": "5"}, True, ""},
		{"a = 5", map[string]string{"a": "6"}, False, ""},
		{"a = 5", nil, Unknown, ""},
		{"NOT (a = 5)", nil, Unknown, ""},
		{"a = 5 OR TRUE", nil, True, ""},
		{"a = 5 AND FALSE", nil, False, ""},
		{"a = 5", map[string]string{"a": "five"}, False, "sql92: cannot compare 'five' with an int: it is not a valid int"},
		{"a >= 2147483648", map[string]string{"a": "x"}, False, "sql92: cannot compare 'x' with a long: it is not a valid long"},
		{"a > b", map[string]string{"a": "1", "b": "x"}, False, "sql92: cannot compare 'x' as a number: it is not a valid double"},
		{"TRUE = a", map[string]string{"a": "true"}, False, "sql92: cannot compare a boolean with the string 'true'"},
		// The error aborts evaluation even though the right side is TRUE.
		{"a = 5 OR b = 'x'", map[string]string{"a": "five", "b": "x"}, False, "sql92: cannot compare 'five' with an int: it is not a valid int"},
	}
	for _, tc := range cases {
		x, err := Compile(tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := x.Evaluate(lookup(tc.props))
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("%q on %v = %v, %v; want %v, %q", tc.expr, tc.props, got, err, tc.want, tc.err)
		}
		if err != nil && !errors.Is(err, ErrEval) {
			t.Errorf("%q: error %v does not wrap ErrEval", tc.expr, err)
		}
		if x.MatchMap(tc.props) != (tc.want == True) {
			t.Errorf("%q on %v: MatchMap disagrees with Evaluate", tc.expr, tc.props)
		}
	}
}

func TestString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"a=5", "a = 5"},
		{"a between 1 and 5.5 and b not in ('x','it''s')", "a BETWEEN 1 AND 5.5 AND b NOT IN ('x', 'it''s')"},
		{"((a = 1) or (b = 2)) and c is not null", "(a = 1 OR b = 2) AND c IS NOT NULL"},
		{"a = 1 or (b = 2 or c = 3)", "a = 1 OR b = 2 OR c = 3"},
		{"NOT a = 5", "(NOT a) = 5"},
		{"not (a = 5)", "NOT (a = 5)"},
		{"- -a > 1e21", "- -a > 1e+21"},
		{"a > 5.", "a > 5.0"},
		{"a > 3000000000 /* long */ -- c\n", "a > 3000000000"},
		{"a = (b = c)", "a = (b = c)"},
		{"(a = b) = c", "a = b = c"},
		{"a > -(b)", "a > -b"},
		{"TRUE AND NOT NULL", "TRUE AND NOT NULL"},
	}
	for _, tc := range cases {
		x, err := Compile(tc.in)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.in, err)
		}
		if got := x.String(); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if x.Source() != tc.in {
			t.Errorf("Source() = %q, want %q", x.Source(), tc.in)
		}
		y, err := Compile(x.String())
		if err != nil || y.String() != tc.want {
			t.Errorf("String is not a fixed point: %q -> %v, %v", tc.want, y, err)
		}
	}
}

func TestCache(t *testing.T) {
	c := NewCache(2)
	a1, err := c.Compile("a = 1")
	if err != nil {
		t.Fatal(err)
	}
	if a2, _ := c.Compile("a = 1"); a2 != a1 {
		t.Errorf("second Compile of the same text did not hit the cache")
	}
	if _, err := c.Compile("a = "); !errors.Is(err, ErrSyntax) {
		t.Errorf("bad expression: err = %v", err)
	}
	if _, err := c.Compile("a = "); !errors.Is(err, ErrSyntax) {
		t.Errorf("cached bad expression: err = %v", err)
	}
	c.Compile("a = 1") // most recent: "a = 1", then "a = "
	c.Compile("b = 2") // evicts "a = "
	if c.Len() != 2 {
		t.Errorf("Len = %d, want 2", c.Len())
	}
	if a3, _ := c.Compile("a = 1"); a3 != a1 {
		t.Errorf("recently used entry was evicted")
	}

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				expr := "a = " + string(rune('0'+(i+j)%10))
				x, err := c.Compile(expr)
				if err != nil || !x.MatchMap(map[string]string{"a": expr[4:]}) {
					t.Errorf("concurrent Compile(%q) = %v, %v", expr, x, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if c.Len() > 2 {
		t.Errorf("Len = %d exceeds the bound", c.Len())
	}
}

func TestJavaNumberParsing(t *testing.T) {
	doubles := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"5", 5, true}, {" 5\t", 5, true}, {"+5.", 5, true}, {"-.5", -0.5, true}, {"1e3", 1000, true},
		{"1E+3", 1000, true}, {"1e", 0, false}, {"5d", 5, true}, {"5F", 5, true}, {"5ff", 0, false},
		{"0x1p3", 8, true}, {"0X1.8P1d", 3, true}, {"0x1", 0, false}, {"0x", 0, false},
		{"NaN", math.NaN(), true}, {"-Infinity", math.Inf(-1), true}, {"infinity", 0, false}, {"inf", 0, false},
		{"1_000", 0, false}, {"\u00a05", 0, false}, {"", 0, false}, {".", 0, false}, {"1e400", math.Inf(1), true},
		{"١", 0, false}, // Double.valueOf reads ASCII digits only
	}
	for _, tc := range doubles {
		got, ok := parseJavaDouble(tc.in)
		if ok != tc.ok || ok && cmpDouble(got, tc.want) != 0 {
			t.Errorf("parseJavaDouble(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	ints := []struct {
		in   string
		k    kind
		want int64
		ok   bool
	}{
		{"5", kInt, 5, true}, {"+5", kInt, 5, true}, {"-2147483648", kInt, math.MinInt32, true},
		{"2147483648", kInt, 0, false}, {"2147483648", kLong, 2147483648, true},
		{"-9223372036854775808", kLong, math.MinInt64, true}, {"9223372036854775808", kLong, 0, false},
		{" 5", kInt, 0, false}, {"5L", kLong, 0, false}, {"+", kInt, 0, false}, {"", kInt, 0, false},
		{"١٢", kInt, 12, true},         // Integer.parseInt takes any Unicode decimal digit of the BMP
		{"\U0001D7D3", kInt, 0, false}, // but not one outside it (a surrogate pair in Java)
	}
	for _, tc := range ints {
		got, e := parseJavaInteger(tc.in, tc.k)
		if (e.k != kErr) != tc.ok || tc.ok && got != tc.want {
			t.Errorf("parseJavaInteger(%q, %v) = %v, %v; want %v, %v", tc.in, tc.k, got, e.k != kErr, tc.want, tc.ok)
		}
	}
	if cmpDouble(math.Copysign(0, -1), 0) != -1 || cmpDouble(math.NaN(), math.Inf(1)) != 1 || cmpDouble(math.NaN(), math.NaN()) != 0 {
		t.Errorf("cmpDouble does not follow Double.compare")
	}
}
