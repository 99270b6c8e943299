package web

import (
	"net/http"
	"strconv"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// rekeyContent is the re-key page: the dry run's counts for a filter and
// the form that applies them, or the result.
type rekeyContent struct {
	Filter filterView
	Result quarantine.RekeyResult
	Done   bool // Result is an apply's, not a dry run's
	Reason string
}

// rekeyForm shows what a re-key of the list's filter would change (GET
// /messages/rekey?filter…): a dry run, with the form to apply it.
func (h *Handler) rekeyForm(w http.ResponseWriter, r *http.Request, s *session) {
	h.rekey(w, r, s, r.URL.Query(), true)
}

// rekeyApply applies a re-key previewed by rekeyForm (POST
// /messages/rekey with the filter, expect_changed and a reason).
func (h *Handler) rekeyApply(w http.ResponseWriter, r *http.Request, s *session) {
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, s, quarantine.Errorf(quarantine.EINVALID, "the form is malformed"))
		return
	}
	h.rekey(w, r, s, r.PostForm, false)
}

func (h *Handler) rekey(w http.ResponseWriter, r *http.Request, s *session, v map[string][]string, dry bool) {
	if !canOperate(s.token) {
		h.refuse(w, r, s, r.URL.Path, "ui: re-keying needs an operator", "Your token may not re-key messages: it needs the operator role.")
		return
	}
	fv, f, err := h.parseFilter(s.token, v)
	c := &rekeyContent{Filter: fv, Done: !dry, Reason: first(v["reason"])}
	req := collect.RekeyRequest{DryRun: dry, Reason: c.Reason}
	if err == nil && !dry {
		n, perr := strconv.Atoi(first(v["expect_changed"]))
		if perr != nil || n < 0 {
			err = quarantine.FieldErrorf(quarantine.EINVALID, "expect_changed", "the previewed count is missing: reload the page")
		}
		req.ExpectChanged = &n
	}
	if err == nil {
		c.Result, err = rules.RekeyAs(r.Context(), s.token, h.cfg.Edit.Preparer, h.cfg.Store, f, req)
	}
	if err != nil && statusOf(err) >= http.StatusInternalServerError {
		h.fail(w, r, s, err)
		return
	}
	status := http.StatusOK
	p := page{Title: "Re-key", Token: s.token, CSRF: s.csrf, Content: c}
	if err != nil {
		status, p.Error = statusOf(err), quarantine.ErrorMessage(err)
		if !dry { // show the counts of now, with the refusal
			c.Done = false
			req.DryRun, req.ExpectChanged = true, nil
			if res, derr := rules.RekeyAs(r.Context(), s.token, h.cfg.Edit.Preparer, h.cfg.Store, f, req); derr == nil {
				c.Result = res
			}
		}
	}
	h.render(w, r, status, "rekey", p)
}

// first is the first of vs, or "".
func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}
