# A client container for the compose test: Debian's kcat on the local
# debian:12 base image (made by .ci/docker-setup).
FROM debian:12
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends kcat \
 && rm -rf /var/lib/apt/lists/*
ENTRYPOINT ["kcat"]
