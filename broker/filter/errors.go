package filter

import (
	"errors"
	"fmt"
)

// ErrSyntax is wrapped by every error Compile returns for an expression
// that is not valid SQL92 as RocketMQ 4.9 accepts it: a lexical or grammar
// error, or an operand RocketMQ's parser rejects (NULL compared with '=',
// a string compared with '>', BETWEEN bounds out of order, ...).
// The broker answers it with SUBSCRIPTION_PARSE_FAILED.
var ErrSyntax = errors.New("sql92: invalid expression")

// ErrTooComplex is wrapped by the error Compile returns for an expression
// longer than MaxExprLen bytes or nested deeper than MaxDepth. It protects
// the broker from expressions that would cost unbounded memory or stack;
// no useful subscription comes near either limit.
var ErrTooComplex = errors.New("sql92: expression too complex")

// ErrEval is wrapped by the error Evaluate returns when RocketMQ's
// evaluator would throw for a message: a property compared with a number
// is not a number, or a boolean is compared with a string. The message
// then does not match (RocketMQ's ExpressionMessageFilter logs and
// filters it out), even when another OR branch would have been true.
var ErrEval = errors.New("sql92: evaluation error")

// CompileError describes why an expression does not compile. It wraps
// ErrSyntax or ErrTooComplex.
type CompileError struct {
	// Pos is the 1-based character position of the offending token in the
	// expression, or 0 when the error concerns the whole expression.
	Pos int
	// Msg says what is wrong and, where it helps, what to write instead.
	Msg string
	err error
}

func (e *CompileError) Error() string {
	if e.Pos > 0 {
		return fmt.Sprintf("sql92: at %d: %s", e.Pos, e.Msg)
	}
	return "sql92: " + e.Msg
}

// Unwrap returns ErrSyntax or ErrTooComplex.
func (e *CompileError) Unwrap() error { return e.err }

// EvalError describes why a message could not be evaluated. It wraps
// ErrEval.
type EvalError struct {
	Msg string
}

func (e *EvalError) Error() string { return "sql92: " + e.Msg }

// Unwrap returns ErrEval.
func (e *EvalError) Unwrap() error { return ErrEval }
