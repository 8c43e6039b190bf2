#!/bin/sh
# Run in the Dockerfile's build stage: assemble in $1 the whole root
# filesystem of the runtime image (which is FROM scratch): the broker and the
# shared libraries it links (found with ldd, so any architecture works),
# busybox for the start scripts, the scripts of docker/rootfs, a user
# `runnel` (uid 1001) and the directories it owns.
set -eu
R="$1"
BIN="$2"

mkdir -p "$R/bin" "$R/usr/local/bin" "$R/usr/sbin" "$R/tmp" "$R/var/lib/runnel/data" "$R/etc/kafka" \
    "$R/mnt/shared/config"
chmod 1777 "$R/tmp"

copy_with_libs() {
    mkdir -p "$R$(dirname "$2")"
    cp "$1" "$R$2"
    ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' |
        while read -r lib; do
            [ -e "$R$lib" ] && continue
            mkdir -p "$R$(dirname "$lib")"
            cp -L "$lib" "$R$lib"
        done
}

copy_with_libs "$BIN" /usr/local/bin/runnel
copy_with_libs /bin/busybox /bin/busybox
for applet in $(/bin/busybox --list); do
    [ -e "$R/bin/$applet" ] || ln -s busybox "$R/bin/$applet"
done

cp -a /src/docker/rootfs/. "$R/"

printf 'root:x:0:0:root:/root:/bin/sh\nrunnel:x:1001:1001:Runnel:/var/lib/runnel:/bin/sh\n' \
    >"$R/etc/passwd"
printf 'root:x:0:\nrunnel:x:1001:\n' >"$R/etc/group"
# Start scripts written for Kafka's images edit /etc/confluent/docker/configure
# and write /etc/kafka/kafka.properties as the image's user.
chown -R 1001:1001 "$R/var/lib/runnel" "$R/etc/kafka" "$R/etc/confluent/docker"
