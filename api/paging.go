package api

import (
	"context"
	"sort"
	"strings"
)

// Lists page by name: every list takes prefix=, limit= (default 1000) and
// after=, and answers next (the last name it shows) when more names follow.

const (
	defaultListLimit = 1000
	maxListLimit     = 10000
)

// Page selects the names one list answer covers. limit 0 means every name
// (the overview's own reads).
type Page struct {
	prefix, after string
	limit         int
}

// pageOf checks a list request's paging parameters.
func pageOf(prefix *string, limit *int, after *string) (Page, error) {
	p := Page{limit: defaultListLimit}
	if prefix != nil {
		p.prefix = *prefix
	}
	if after != nil {
		p.after = *after
	}
	if limit != nil {
		if *limit < 1 || *limit > maxListLimit {
			return Page{}, InvalidParameter("limit=%d: must be between 1 and %d", *limit, maxListLimit)
		}
		p.limit = *limit
	}
	return p, nil
}

// candidates are the sorted names this page may show, in order: those with
// the prefix, after the cursor.
func (p Page) candidates(names []string) []string {
	if !sort.StringsAreSorted(names) {
		names = append([]string(nil), names...)
		sort.Strings(names)
	}
	start := sort.SearchStrings(names, p.prefix)
	if p.after >= p.prefix {
		start = sort.Search(len(names), func(i int) bool { return names[i] > p.after })
	}
	end := start
	for end < len(names) && strings.HasPrefix(names[end], p.prefix) {
		end++
	}
	return names[start:end]
}

// full tells whether a page that has shown n items is complete.
func (p Page) full(n int) bool { return p.limit > 0 && n >= p.limit }

// listOf answers one page of a list: its items, in name order, and its next.
// each is the kind's walk (eachLock, ...), which leaves out what the request's
// token may not read.
func listPage[T any](ctx context.Context, prefix *string, limit *int, after *string, each func(context.Context, Page, func(T)) (*string, error)) ([]T, *string, error) {
	p, err := pageOf(prefix, limit, after)
	if err != nil {
		return nil, nil, err
	}
	items := []T{}
	next, err := each(ctx, p, func(b T) { items = append(items, b) })
	return items, next, err
}

// List answers one page of a list of kind (its token kind, "locks"; "" when
// names lists only what the request may see already): names lists every
// name, read reads one (ErrSkip: left out); see each.
func List[T any](ctx context.Context, prefix *string, limit *int, after *string, kind string, names func(context.Context) ([]string, error), read func(context.Context, string) (T, error)) ([]T, *string, error) {
	return listPage(ctx, prefix, limit, after, func(ctx context.Context, p Page, fn func(T)) (*string, error) {
		return each(ctx, kind, p, names, read, fn)
	})
}
