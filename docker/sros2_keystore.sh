#!/bin/bash
# Create the SROS2 keystore of a deployment and one enclave per process (container), once:
# a keystore or enclave that exists already is kept, so restarts reuse the same identities.
#
#   sros2_keystore.sh KEYSTORE ENCLAVE...      e.g. sros2_keystore.sh /keystore /learner /robot_0
#
# Run inside the rl_ros2 image (it has sros2); compose.sros2.yaml runs it as its keystore service.
set -euo pipefail
if [ "$#" -lt 2 ]; then
    echo "usage: $0 KEYSTORE ENCLAVE... (enclaves are absolute names such as /robot_0)" >&2
    exit 2
fi
keystore=$1
shift
source /opt/ros/kilted/setup.bash
if [ ! -d "$keystore/enclaves" ]; then
    ros2 security create_keystore "$keystore"
fi
for enclave in "$@"; do
    if [ ! -d "$keystore/enclaves$enclave" ]; then
        ros2 security create_enclave "$keystore" "$enclave"
    fi
done
echo "keystore $keystore: enclaves $*"
