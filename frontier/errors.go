package frontier

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownPredicate is returned by registries when a predicate name is
// neither built in nor configured.
var ErrUnknownPredicate = errors.New("frontier: unknown predicate")

// Error is a compile error in a predicate's source. Its message is one line,
// "line:column: cause"; Snippet adds the source line and a caret.
type Error struct {
	Line   int    // 1-based
	Column int    // 1-based, in characters
	Msg    string // the cause
	Source string // the whole predicate
}

func (e *Error) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Msg) }

// Snippet returns the offending source line with a caret under the column.
func (e *Error) Snippet() string {
	lines := strings.Split(e.Source, "\n")
	if e.Line < 1 || e.Line > len(lines) {
		return ""
	}
	line := strings.ReplaceAll(lines[e.Line-1], "\t", " ")
	return line + "\n" + strings.Repeat(" ", max(e.Column-1, 0)) + "^"
}

// errorAt builds an Error at a rune offset of src.
func errorAt(src string, offset int, format string, args ...any) *Error {
	line, col := 1, 1
	i := 0
	for _, r := range src {
		if i == offset {
			break
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i++
	}
	return &Error{Line: line, Column: col, Msg: fmt.Sprintf(format, args...), Source: src}
}
