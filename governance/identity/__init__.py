"""Who is calling: the Principal (principal), bearer-token verification (tokens: static file or JWT), turning an
Authorization header into a Principal (authentication, http for ASGI apps), operators' console accounts (operators,
oidc), and what each role may do (rbac)."""
