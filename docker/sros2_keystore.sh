#!/bin/bash
# The SROS2 keystore of a deployment, and what each container may see of it.
#
#   sros2_keystore.sh KEYSTORE ENCLAVE[=DEST]...
#       Create KEYSTORE (its CA) and each ENCLAVE once: a keystore or enclave that exists already
#       is kept, so restarts reuse the same identities. For ENCLAVE=DEST, DEST (a container's
#       own volume) then gets the enclaves named with it, and nothing else (below).
#       e.g. sros2_keystore.sh /ca /learner=/to/learner /robot=/to/robots
#   sros2_keystore.sh --distribute KEYSTORE DEST ENCLAVE...
#       Only the copy: DEST gets the enclaves, without creating anything (needs no ROS).
#
# What DEST gets: public/ (the CA certificates ca.cert.pem, identity_ca.cert.pem,
# permissions_ca.cert.pem) and enclaves/<name>/ for each enclave given to it: its key.pem and
# cert.pem, governance.p7s, permissions.xml/.p7s signed by the CA, and the CA certificates.
# Never private/ (the CA's private keys, which sign new identities and permissions) and never an
# enclave that was not given to DEST: a container holding them could make itself any identity.
# sros2 links the enclave's CA certificates and governance.p7s to the keystore's copies; DEST
# gets the files the links point at (cp -L), since the keystore is not mounted where DEST is.
# What was in DEST's public/ and enclaves/ before is replaced, so an enclave no longer given is
# gone. Nested enclaves (/robot/arm inside /robot) are identities of their own: giving /robot
# copies the files of /robot alone.
#
# Governance and permissions name one ROS_DOMAIN_ID (sros2 reads it when it signs them), so
# creating needs ROS_DOMAIN_ID, and a keystore made for another domain is refused rather than
# reused (nodes would fail to start with it): remove its volume to make a new one.
#
# Run inside the rl_ros2 image (it has sros2); compose.sros2.yaml runs it as its keystore
# service, the only container that mounts KEYSTORE.
set -euo pipefail

# A ROS namespace: "/"-separated tokens of letters, digits and "_", not starting with a digit.
# Checked before a name becomes a path, so that no "..", "//" or space reaches cp and rm.
enclave_pattern='^(/[A-Za-z_][A-Za-z0-9_]*)+$'
domain_file=rl_ros2_domain_id
public_certs=(ca.cert.pem identity_ca.cert.pem permissions_ca.cert.pem)

usage() {
    cat >&2 <<EOF
usage: $0 KEYSTORE ENCLAVE[=DEST]...       create, then give each DEST its enclaves
       $0 --distribute KEYSTORE DEST ENCLAVE...   only give DEST the enclaves
enclaves are absolute names such as /robot; DEST is a folder outside KEYSTORE
EOF
    exit 2
}

fail() {
    echo "$0: $*" >&2
    exit 1
}

check_enclave_name() {
    [[ $1 =~ $enclave_pattern ]] || { echo "$0: not an enclave name: '$1'" >&2; usage; }
}

# Refuse a DEST that is KEYSTORE, inside it or around it: the copy would then hold private/.
check_apart() {
    local keystore dest
    keystore=$(realpath -m -- "$1")
    dest=$(realpath -m -- "$2")
    case "$dest/" in "$keystore/"*) fail "$2 is inside the keystore $1" ;; esac
    case "$keystore/" in "$dest/"*) fail "the keystore $1 is inside $2" ;; esac
}

# Fail closed: no file under DEST may be one of the CA's private keys, and the only private keys
# there are the given enclaves' own key.pem.
check_no_ca_key() {
    local keystore=$1 dest=$2 file secret
    while IFS= read -r -d '' file; do
        if [ "$(basename -- "$file")" != key.pem ] && grep -q "PRIVATE KEY" -- "$file"; then
            fail "$file holds a private key; refusing to hand it out"
        fi
        for secret in "$keystore"/private/*; do
            if [ -f "$secret" ] && cmp -s -- "$secret" "$file"; then
                fail "$file is the CA's $(basename -- "$secret"); refusing to hand it out"
            fi
        done
    done < <(find "$dest" -type f -print0)
}

# distribute KEYSTORE DEST ENCLAVE...: DEST gets the public certificates and these enclaves only.
distribute() {
    local keystore=$1 dest=$2 cert enclave file
    shift 2
    [ -d "$dest" ] || fail "$dest is not a folder (the container's volume)"
    check_apart "$keystore" "$dest"
    for enclave in "$@"; do
        check_enclave_name "$enclave"
        [ -f "$keystore/enclaves$enclave/key.pem" ] || fail "no enclave $enclave in $keystore"
    done
    # Keys readable by the containers' user alone (every container runs as the image's user).
    umask 077
    rm -rf -- "$dest/public" "$dest/enclaves"
    mkdir -p -- "$dest/public" "$dest/enclaves"
    for cert in "${public_certs[@]}"; do
        cp -L -- "$keystore/public/$cert" "$dest/public/$cert"
    done
    for enclave in "$@"; do
        mkdir -p -- "$dest/enclaves$enclave"
        # Files only: a folder inside an enclave is a nested enclave, another identity.
        for file in "$keystore/enclaves$enclave"/*; do
            if [ -f "$file" ]; then
                cp -L -- "$file" "$dest/enclaves$enclave/"
            fi
        done
    done
    check_no_ca_key "$keystore" "$dest"
    echo "$dest: enclaves $*"
}

# create KEYSTORE ENCLAVE[=DEST]...
create() {
    local keystore=$1 spec enclave dest
    shift
    : "${ROS_DOMAIN_ID:?is needed: governance and permissions name the domain}"
    local -a enclaves=() destinations=()
    local -A given=()
    for spec in "$@"; do
        enclave=${spec%%=*}
        check_enclave_name "$enclave"
        enclaves+=("$enclave")
        if [[ $spec == *=* ]]; then
            dest=${spec#*=}
            [ -n "$dest" ] || usage
            check_apart "$keystore" "$dest"
            [ -n "${given[$dest]+set}" ] || destinations+=("$dest")
            given[$dest]="${given[$dest]:-} $enclave"
        fi
    done
    if ! command -v ros2 >/dev/null; then
        # ROS's setup scripts read unset variables.
        set +u
        source /opt/ros/kilted/setup.bash
        set -u
    fi
    # sros2 signs governance.p7s last: a keystore without it was interrupted, and
    # create_keystore completes it.
    if [ ! -f "$keystore/enclaves/governance.p7s" ]; then
        ros2 security create_keystore "$keystore"
        echo "$ROS_DOMAIN_ID" >"$keystore/$domain_file"
    elif [ -f "$keystore/$domain_file" ] \
            && [ "$(cat -- "$keystore/$domain_file")" != "$ROS_DOMAIN_ID" ]; then
        echo "$0: $keystore was made for ROS_DOMAIN_ID $(cat -- "$keystore/$domain_file"), not" \
            "$ROS_DOMAIN_ID; remove it (its volume) to make one for this domain" >&2
        exit 2
    fi
    for enclave in "${enclaves[@]}"; do
        if [ ! -f "$keystore/enclaves$enclave/key.pem" ] \
                || [ ! -f "$keystore/enclaves$enclave/permissions.p7s" ]; then
            ros2 security create_enclave "$keystore" "$enclave"
        fi
    done
    echo "keystore $keystore: enclaves ${enclaves[*]}"
    for dest in "${destinations[@]}"; do
        # shellcheck disable=SC2086  # enclave names hold no spaces (checked above)
        distribute "$keystore" "$dest" ${given[$dest]}
    done
}

if [ "${1:-}" = --distribute ]; then
    [ "$#" -ge 4 ] || usage
    shift
    distribute "$@"
else
    [ "$#" -ge 2 ] || usage
    create "$@"
fi
