//go:build !unix

package statedir

// oNoFollow: no such flag here; openPrivate's checks of the opened file and
// checkNoLinks still refuse a link.
const oNoFollow = 0
