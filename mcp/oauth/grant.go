package oauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// clientCredentials gets a token for the bridge itself (RFC 6749 §4.4),
// authenticated with its secret or, with a private key, a signed
// assertion (RFC 7523 §2.2).
func (c *Client) clientCredentials(ctx context.Context, srv *server, scopes []string) (*record, error) {
	if srv.client.ID == "" {
		return nil, fmt.Errorf("upstream %q: the client credentials grant needs oauth.client_id", c.cfg.Upstream)
	}
	params := url.Values{}
	if srv.resource != "" {
		params.Set("resource", srv.resource)
	}
	cc := clientcredentials.Config{
		ClientID:       srv.client.ID,
		ClientSecret:   srv.client.Secret,
		TokenURL:       srv.asm.TokenEndpoint,
		Scopes:         scopes,
		EndpointParams: params,
		AuthStyle:      srv.client.authStyle(),
	}
	if c.cfg.PrivateKey != nil {
		assertion, err := clientAssertion(c.cfg.PrivateKey, srv.client.ID, srv.asm.Issuer, c.m.now())
		if err != nil {
			return nil, fmt.Errorf("upstream %q: client assertion: %w", c.cfg.Upstream, err)
		}
		cc.ClientSecret = ""
		cc.AuthStyle = oauth2.AuthStyleInParams
		params.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		params.Set("client_assertion", assertion)
	}
	tok, err := cc.Token(c.clientContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("upstream %q: client credentials grant: %w", c.cfg.Upstream, tokenErr(err))
	}
	return c.newRecord(srv, tok, scopes), nil
}

// newRecord is the vault record of a token just obtained.
func (c *Client) newRecord(srv *server, tok *oauth2.Token, requested []string) *record {
	rec := &record{
		ServerURL:    c.cfg.ServerURL,
		AccessToken:  tok.AccessToken,
		RefreshToken: tok.RefreshToken,
		Expiry:       tok.Expiry,
		Scopes:       scopesOf(tok),
		Issuer:       srv.asm.Issuer,
		TokenURL:     srv.asm.TokenEndpoint,
		Resource:     srv.resource,
		Client:       srv.client,
	}
	if rec.Scopes == nil {
		rec.Scopes = requested
	}
	return rec
}

// clientAssertion signs the JWT with which a client authenticates with
// private_key_jwt (RFC 7523 §3): the client is issuer and subject, the
// authorization server's issuer identifier the audience.
func clientAssertion(key crypto.Signer, clientID, audience string, now time.Time) (string, error) {
	var method jwt.SigningMethod
	switch k := key.Public().(type) {
	case *rsa.PublicKey:
		method = jwt.SigningMethodRS256
	case *ecdsa.PublicKey:
		if k.Curve.Params().BitSize != 256 {
			return "", errors.New("an ECDSA key must be P-256 (ES256)")
		}
		method = jwt.SigningMethodES256
	case ed25519.PublicKey:
		method = jwt.SigningMethodEdDSA
	default:
		return "", fmt.Errorf("unsupported key type %T", k)
	}
	claims := jwt.MapClaims{
		"iss": clientID,
		"sub": clientID,
		"aud": audience,
		"iat": now.Unix(),
		"exp": now.Add(5 * time.Minute).Unix(),
		"jti": rand.Text(),
	}
	return jwt.NewWithClaims(method, claims).SignedString(key)
}

// ParsePrivateKey reads a PEM private key (PKCS #8, PKCS #1 RSA or SEC 1
// EC) for Config.PrivateKey. Its errors never quote the input.
func ParsePrivateKey(pemBytes []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("no PEM block found (expected -----BEGIN PRIVATE KEY-----)")
	}
	var key any
	var err error
	switch strings.TrimSpace(block.Type) {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("PEM block %q is not a private key the bridge reads", block.Type)
	}
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported private key type %T", key)
	}
	if _, err := clientAssertion(s, "check", "check", time.Now()); err != nil {
		return nil, err
	}
	return s, nil
}
