package api

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// tokenList is the body of GET /api/v1/tokens.
type tokenList struct {
	Items []*quarantine.Token `json:"items"`
}

// createTokenBody is the body of POST /api/v1/tokens.
type createTokenBody struct {
	Name   string   `json:"name"`
	Role   string   `json:"role"`
	Owners []string `json:"owners"`
}

// createdToken is a new token with its secret, shown this once.
type createdToken struct {
	*quarantine.Token
	Secret string `json:"secret"`
}

func tidyToken(t *quarantine.Token) *quarantine.Token {
	if t.Owners == nil {
		t.Owners = []string{}
	}
	return t
}

// ownerElement returns err, a refusal of t by t.Validate, naming the
// first owner the domain refuses ("owners" becomes "/owners/2").
func ownerElement(err error, t *quarantine.Token) error {
	if quarantine.ErrorField(err) != "owners" {
		return err
	}
	for i, o := range t.Owners {
		one := quarantine.Token{Name: "x", Role: quarantine.RoleViewer, Owners: []string{o}}
		if one.Validate() != nil {
			return quarantine.FieldErrorf(quarantine.ErrorCode(err), "/owners/"+strconv.Itoa(i), "%s", quarantine.ErrorMessage(err))
		}
	}
	return err
}

// listTokens answers every token, revoked ones included, without secrets.
func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.fail(w, r, err)
		return
	}
	ts, err := s.cfg.Store.ListTokens(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res := tokenList{Items: make([]*quarantine.Token, 0, len(ts))}
	for _, t := range ts {
		res.Items = append(res.Items, tidyToken(t))
	}
	s.writeJSON(w, r, http.StatusOK, res)
}

// createToken makes a token and answers it with its secret: 201, the only
// time the secret is shown (only its SHA-256 is stored).
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	var b createTokenBody
	if err := s.decodeBody(w, r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	actor := tokenFrom(r.Context()).Actor()
	secret, hash := quarantine.NewTokenSecret()
	t := &quarantine.Token{Name: b.Name, Role: quarantine.Role(b.Role), Owners: b.Owners, CreatedBy: actor, SecretHash: hash}
	tidyToken(t)
	if err := t.Validate(); err != nil {
		s.fail(w, r, rules.InBody(ownerElement(err, t), ""))
		return
	}
	if err := s.cfg.Store.CreateToken(r.Context(), t, actor); err != nil {
		s.fail(w, r, rules.InBody(err, ""))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", "/api/v1/tokens/"+t.ID)
	s.writeJSON(w, r, http.StatusCreated, createdToken{Token: t, Secret: secret})
}

// revokeToken revokes a token and answers it, revoked. Unknown is 404,
// already revoked 409.
func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	noToken := quarantine.FieldErrorf(quarantine.ENOTFOUND, "id", "no token with this id")
	id := chi.URLParam(r, "id")
	if !quarantine.ValidID(id) {
		s.fail(w, r, noToken)
		return
	}
	err := s.cfg.Store.RevokeToken(r.Context(), id, tokenFrom(r.Context()).Actor())
	switch {
	case quarantine.ErrorCode(err) == quarantine.ENOTFOUND:
		s.fail(w, r, noToken)
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	ts, err := s.cfg.Store.ListTokens(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, t := range ts {
		if t.ID == id {
			s.writeJSON(w, r, http.StatusOK, tidyToken(t))
			return
		}
	}
	s.fail(w, r, quarantine.Internal(nil, "revoked token %s is not listed", id))
}
