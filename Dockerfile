# The `raptor` server. Build: docker build -t raptor .   Run: docker compose up
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p raptor-server --bin raptor

# Swagger UI's files for /docs, from the lock file (only `dependencies`: swagger-ui-dist).
FROM node:20-bookworm-slim AS docs-assets
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

FROM debian:bookworm-slim
# ca-certificates: the Stripe client verifies TLS against the system roots.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --no-create-home raptor
COPY --from=build /src/target/release/raptor /usr/local/bin/raptor
COPY --from=docs-assets /src/node_modules/swagger-ui-dist /usr/share/raptor/swagger-ui
# A numeric user, so orchestrators can verify it is not root.
USER 10001:10001
ENV RAPTOR_ADDR=0.0.0.0:8080 \
    RAPTOR_LOG_FORMAT=json \
    RAPTOR_DOCS_ASSETS=/usr/share/raptor/swagger-ui
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=4s --start-period=20s --retries=3 \
  CMD ["raptor", "healthcheck"]
ENTRYPOINT ["raptor"]
CMD ["serve"]
