#!/bin/sh
# settle.sh DEV: waits until the kernel has finished processing DEV's last admin/carrier/address
# change. The kernel applies carrier changes (and the operstate that makes IPv6 configure a link)
# in deferred link-watch work, and completes IPv6 addresses (even with accept_dad=0) in deferred
# DAD work, after the `ip` command has returned; the next batch command could see the old state.
# Wait for the operstate to match the flags and for no address to be tentative, then take the
# rtnl lock once (a no-op RTM_NEWLINK), which that work holds while it updates routes.
d=/sys/class/net/$1
i=0
while [ -e "$d" ] && [ $i -lt 2000 ]; do
    up=$(( $(cat "$d/flags") & 1 ))
    carrier=$(cat "$d/carrier" 2>/dev/null || echo 0)
    state=$(cat "$d/operstate")
    if [ "$up" = 1 ] && [ "$carrier" = 1 ]; then
        [ "$state" = up ] && break
    else
        [ "$state" != up ] && break
    fi
    i=$((i + 1))
    sleep 0.005
done
while [ -e "$d" ] && [ $i -lt 2000 ] && [ -n "$(ip -6 addr show dev "$1" tentative -dadfailed 2>/dev/null)" ]; do
    i=$((i + 1))
    sleep 0.005
done
[ -e "$d" ] && ip link set dev "$1" 2>/dev/null
exit 0
