// Package filter is RocketMQ's SQL92 message filter (expression type
// "SQL92"), with the grammar and evaluation rules of RocketMQ 4.9's filter
// module, so a subscription selects the same messages here as on a
// RocketMQ broker. It uses only the standard library.
//
// A consumer subscribes with an expression over message properties:
//
//	x, err := filter.Compile("a >= 5 AND TAGS <> 'TagB'")
//	ok := x.Match(func(key string) (string, bool) { v, ok := props[key]; return v, ok })
//
// # Grammar
//
// From loosest to tightest binding; operators of one level associate to
// the left; keywords are matched in any case, property names are case
// sensitive:
//
//	condition  = and { OR and }
//	and        = equality { AND equality }
//	equality   = comparison { "=" comparison | "<>" comparison | IS NULL | IS NOT NULL }
//	comparison = unary { (">" | ">=" | "<" | "<=") unary
//	                   | [NOT] BETWEEN unary AND unary
//	                   | [NOT] IN "(" string { "," string } ")" }
//	unary      = "+" unary | "-" unary | NOT unary | primary
//	primary    = literal | property | "(" condition ")"
//	literal    = string | integer | float | TRUE | FALSE | NULL
//
// The tokens:
//
//   - property: [A-Za-z_$][A-Za-z0-9_$]*, not a keyword. TAGS is the
//     message's tag; every other user or system property is read by name.
//   - string: in single quotes; a quote inside is written twice.
//   - integer: 0 or [1-9][0-9]* with an optional l/L, up to
//     9223372036854775807; no sign (-5 is a negation), no hex or octal.
//   - float: 1.5, 1., .5, 1e3, 1.5E-3; never 0.0 (RocketMQ rejects floats
//     below the smallest positive double).
//   - white space, /* block */ and -- line comments (ended by a line break).
//
// RocketMQ 4.9 has no LIKE, CONTAINS, STARTSWITH or ENDSWITH (the last
// three came in RocketMQ 5) and no arithmetic.
//
// Rules the parser enforces, as RocketMQ's expression factories do: NULL
// cannot be an operand of = or <> (use IS NULL); only numbers, properties
// and negations can be ordered (<, BETWEEN), so 'x' or TRUE there is an
// error; literal BETWEEN bounds must be in order; IN needs a property on
// its left and strings in its list; AND, OR and NOT need conditions, where
// a property alone counts as one.
//
// # Evaluation
//
// Properties are strings. A comparison converts the string to the other
// side's Java type, as RocketMQ's ComparisonExpression does: compared with
// an integer literal it is read with Integer.valueOf (or Long.valueOf for
// literals beyond int32), with a float literal with Double.valueOf, with
// TRUE/FALSE with Boolean.valueOf; two properties are ordered as doubles
// and equal as strings. IN and = 'x' compare strings as they are. Logic is
// three-valued: a missing property is null, a comparison with null is
// null, NOT null is null, and only TRUE selects a message. Two notable
// consequences: NOT binds tighter than comparisons (NOT a = 5 is
// (NOT a) = 5), and a property alone reads FALSE when set (a string is not
// a Boolean). Where RocketMQ's evaluator throws (a = 5 with a = "abc") the
// whole expression fails for that message, which is then not selected,
// even if another OR branch was true; Evaluate reports the reason.
//
// One deliberate difference: RocketMQ ignores whatever follows a complete
// condition ("a = 1 b = 2" means "a = 1"); Compile rejects it, except a
// final "--" comment without a line break.
//
// Compile bounds its input (MaxExprLen bytes, MaxDepth levels of nesting).
// Cache bounds the compiled expressions a broker keeps.
//
// # Files
//
//	doc.go      this overview
//	errors.go   ErrSyntax, ErrTooComplex, ErrEval; CompileError, EvalError
//	expr.go     Expr (Compile, Match, Evaluate, String), the node tree, evaluation, printing
//	parser.go   recursive descent over the grammar with RocketMQ's operand checks; limits
//	lexer.go    tokens: longest match as JavaCC, keywords, literals, comments
//	value.go    Java-typed values, conversions and ordering (Integer/Long/Double.valueOf, Double.compare)
//	cache.go    Cache: compiled expressions by text, bounded LRU
package filter
