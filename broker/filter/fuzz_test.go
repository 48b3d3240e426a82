package filter

import (
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzCompile checks that Compile never panics, that its errors are
// CompileErrors with a position inside the input, and that a compiled
// expression's String compiles to a fixed point that selects exactly the
// same messages. The seed corpus is in testdata/fuzz/FuzzCompile; the
// grammar and error tables are added to it.
func FuzzCompile(f *testing.F) {
	for _, tc := range grammarCases {
		f.Add(tc.expr)
	}
	for _, tc := range compileErrors {
		f.Add(tc.expr)
	}
	f.Fuzz(func(t *testing.T, src string) {
		x, err := Compile(src)
		if err != nil {
			var ce *CompileError
			if !errors.As(err, &ce) || !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrTooComplex) {
				t.Fatalf("Compile(%q): error %v is not a CompileError", src, err)
			}
			if ce.Pos < 0 || ce.Pos > utf8.RuneCountInString(src)+1 {
				t.Fatalf("Compile(%q): position %d outside the input", src, ce.Pos)
			}
			if len(src) > MaxExprLen && !errors.Is(err, ErrTooComplex) {
				t.Fatalf("Compile of %d bytes: %v, want ErrTooComplex", len(src), err)
			}
			return
		}
		s := x.String()
		// The canonical form may be longer than the input (spaces around
		// operators) and, with parentheses added around NOT, a little
		// deeper: compile it without the limits.
		y, err := compile(s, limits{maxLen: 1 << 30, maxDepth: 1 << 30})
		if err != nil {
			t.Fatalf("Compile(%q) = %q, which does not compile: %v", src, s, err)
		}
		if y.String() != s {
			t.Fatalf("String is not a fixed point: %q -> %q -> %q", src, s, y.String())
		}
		msgs := append(testMessages, map[string]string{"a": src, "b": s})
		for _, m := range msgs {
			r1, e1 := x.Evaluate(lookup(m))
			r2, e2 := y.Evaluate(lookup(m))
			if r1 != r2 || (e1 == nil) != (e2 == nil) {
				t.Fatalf("%q and its String %q disagree on %v: %v/%v vs %v/%v", src, s, m, r1, e1, r2, e2)
			}
		}
	})
}
