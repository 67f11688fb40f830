package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/tokens"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// GetHealthz answers while the process serves.
func (s *Server) GetHealthz(context.Context, oapi.GetHealthzRequestObject) (oapi.GetHealthzResponseObject, error) {
	return oapi.GetHealthz200JSONResponse{Status: "ok"}, nil
}

// GetReadyz answers 200 only once a restart is reconciled, while the state
// directory (if any) is written, while the ZooKeeper session is connected or
// suspended for less than Options.SuspendWait (requests wait that long for the
// connection: a ZooKeeper server's restart marks no sidecar unready) and, with
// --zk-require-acl, the last ACL check found no node open to anyone.
func (s *Server) GetReadyz(context.Context, oapi.GetReadyzRequestObject) (oapi.GetReadyzResponseObject, error) {
	if !restored(s.opt.Restored) {
		return nil, &Problem{Status: http.StatusServiceUnavailable, Name: "zookeeper-unavailable",
			Title: http.StatusText(http.StatusServiceUnavailable), Detail: "resuming the predecessor's ZooKeeper session", RetryAfter: 1}
	}
	if s.opt.State != nil {
		if err := s.opt.State.StateErr(); err != nil {
			return nil, stateUnavailable(err)
		}
	}
	if detail := s.unready(time.Now()); detail != "" {
		return nil, &Problem{Status: http.StatusServiceUnavailable, Name: "zookeeper-unavailable",
			Title: http.StatusText(http.StatusServiceUnavailable), Detail: detail, RetryAfter: 1}
	}
	if err := s.opt.Session.ACLReady(); err != nil {
		return nil, &Problem{Status: http.StatusServiceUnavailable, Name: "zookeeper-acl-open",
			Title: http.StatusText(http.StatusServiceUnavailable), Detail: err.Error(), RetryAfter: 5}
	}
	return oapi.GetReadyz200JSONResponse{Status: "ok"}, nil
}

// GetSession describes the sidecar's ZooKeeper session, with the number of
// live leases of the request's token (every live lease without tokens) and,
// once the ACLs are checked (with credentials), the nodes open to anyone: the
// root and recipe parents, the sidecar's own names, never a tenant's.
func (s *Server) GetSession(ctx context.Context, _ oapi.GetSessionRequestObject) (oapi.GetSessionResponseObject, error) {
	info := s.opt.Session.Info()
	out := oapi.GetSession200JSONResponse{
		State:   oapi.SessionState(info.State.String()),
		Timeout: info.Timeout.String(),
		Server:  info.Server,
		Leases:  s.leasesOfToken(ctx),
	}
	if info.SessionID != 0 {
		out.SessionId = fmt.Sprintf("0x%x", info.SessionID)
	}
	if info.Resumed {
		out.ResumedAt = &info.ResumedAt
	}
	if info.LastError != "" {
		msg := info.LastError
		if info.LastErrorOn != "" {
			msg = info.LastErrorOn + ": " + msg
		}
		out.LastError, out.LastErrorAt = &msg, &info.LastErrorAt
	}
	if s.opt.State != nil {
		if err := s.opt.State.StateErr(); err != nil {
			msg := err.Error()
			out.StateError = &msg
		}
	}
	if acls := s.opt.Session.ACLs(); acls.Checked {
		open := make([]string, len(acls.Open))
		for i, o := range acls.Open {
			open[i] = o.Path
		}
		out.OpenAcls = &open
	}
	return out, nil
}

// leasesOfToken counts the live leases of the request's token: a lease belongs to
// the token that made it, and another token's are not the caller's business.
// Without tokens every request is anonymous and every lease counts.
func (s *Server) leasesOfToken(ctx context.Context) int {
	p := tokens.FromContext(ctx)
	if p == tokens.Anonymous {
		return s.opt.Leases.Len()
	}
	return s.opt.Leases.LenOf(p.Name())
}

// restored tells whether ch (Options.Restored) is nil or closed.
func restored(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return ch == nil
	}
}

// unready tells why the session makes the sidecar unready at now ("" when it
// does not): not connected, unless suspended for less than SuspendWait; the
// servers tried and the last connection error.
func (s *Server) unready(now time.Time) string {
	st := s.opt.Session.State()
	if st == zookeeper.StateConnected {
		return ""
	}
	if since, ok := s.opt.Session.Suspension(); ok {
		if now.Sub(since) < s.opt.SuspendWait {
			return ""
		}
		return fmt.Sprintf("ZooKeeper session suspended since %s, longer than the suspend wait (%s); %s",
			since.UTC().Format(time.RFC3339Nano), s.opt.SuspendWait, s.opt.Session.Unreachable())
	}
	return "ZooKeeper session " + st.String() + "; " + s.opt.Session.Unreachable()
}
