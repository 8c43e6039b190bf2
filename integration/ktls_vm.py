"""A throwaway virtual machine whose kernel has kernel TLS, for the tests and
the benchmark of the kTLS fetch path (SSL_sendfile).

The host kernel may have no `tls` module (a container or a micro-VM kernel),
so the broker could never take that path here. This module boots Debian's
own kernel (fetched by `.ci/install-deps --test` into integration/.deps/kernel,
with just its TLS and crypto modules) under qemu, with an initramfs holding
busybox, the binaries the caller names and the shared libraries they load,
and a shell script to run as the machine's only job. The machine has a
loopback interface and no other network; its root file system is the
initramfs (tmpfs), so the broker's log lives in memory.

The script's output comes back on the serial console, then the machine
powers off. Everything is bounded: qemu is killed after `timeout` seconds.
Software emulation by default (about ten seconds to boot and run a short
job); KVM when RUNNEL_VM_KVM=1 and /dev/kvm is usable.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

from procs import DEPS

KERNEL_DIR = DEPS / "kernel"
EXIT_MARK = "KTLSVM-EXIT"

# Runs as PID 1: mounts what the programs need, brings loopback up, loads the
# kernel TLS module and the CPU's AES-GCM drivers (other crypto modules load
# on demand through modprobe), runs /job/job.sh and prints its exit status,
# then powers the machine off.
INIT = """#!/bin/busybox sh
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp /dev/shm && mount -t tmpfs tmp /tmp
ip link set lo up
modprobe tls || echo "modprobe tls failed"
# what udev loads at boot on a machine whose CPU has AES-NI and PCLMULQDQ
modprobe aesni_intel 2>/dev/null
modprobe ghash_clmulni_intel 2>/dev/null
cd /job
sh /job/job.sh > /dev/console 2>&1
echo "%s $?" > /dev/console
sync
reboot -f
""" % EXIT_MARK


# Shell functions every job can call: KtlsVm.run puts them before the job.
JOB_LIB = r"""
wait_for_broker() {  # $1: the broker's pid, $2: its log; waits for 127.0.0.1:9092
    i=0
    while [ $i -lt 300 ]; do
        kcat -L -b 127.0.0.1:9092 -m 1 > /dev/null 2>&1 && return 0
        kill -0 $1 2>/dev/null || break
        sleep 0.2; i=$((i + 1))
    done
    echo "broker did not start"; cat $2; return 1
}
"""


def kernel_present():
    return (KERNEL_DIR / "vmlinuz").is_file() and any((KERNEL_DIR / "lib" / "modules").glob("*"))


def tools_present():
    return all(shutil.which(t) for t in ("qemu-system-x86_64", "busybox", "cpio", "ldd"))


def _libraries(binary):
    """The shared objects binary loads, as absolute paths (the loader too)."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True,
                         timeout=30).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts and parts[parts.index("=>") + 1].startswith("/"):
            libs.append(parts[parts.index("=>") + 1])
        elif parts and parts[0].startswith("/"):
            libs.append(parts[0])
    return libs


def _copy_into(root, src, dest=None):
    target = root / (dest or str(src)).lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(os.path.realpath(src), target)
    return target


class KtlsVm:
    """Build with binaries and files, then run(job_script) -> (exit status, console text)."""

    def __init__(self, workdir, binaries, files=None, memory_mb=1536, cpus=2):
        self.workdir = Path(workdir)
        self.binaries = dict(binaries)  # path inside the VM -> host path
        self.files = dict(files or {})  # path inside the VM -> host path
        self.memory_mb = memory_mb
        self.cpus = cpus

    def _initramfs(self, job_script):
        root = self.workdir / "rootfs"
        shutil.rmtree(root, ignore_errors=True)
        for d in ("bin", "sbin", "usr/bin", "usr/sbin", "proc", "sys", "dev", "tmp", "job"):
            (root / d).mkdir(parents=True, exist_ok=True)
        _copy_into(root, shutil.which("busybox"), "/bin/busybox")
        init = root / "init"
        init.write_text(INIT)
        init.chmod(0o755)
        shutil.copytree(KERNEL_DIR / "lib", root / "lib", dirs_exist_ok=True)
        for inside, host in self.binaries.items():
            _copy_into(root, host, inside).chmod(0o755)
            for lib in _libraries(host):
                _copy_into(root, lib)
        for inside, host in self.files.items():
            _copy_into(root, host, inside)
        (root / "job" / "job.sh").write_text(JOB_LIB + job_script)
        image = self.workdir / "initramfs.cpio"
        names = subprocess.run(["find", ".", "-print0"], cwd=root, capture_output=True,
                               check=True, timeout=60).stdout
        with open(image, "wb") as out:
            subprocess.run(["cpio", "--null", "-o", "-H", "newc", "--quiet"], cwd=root,
                           input=names, stdout=out, check=True, timeout=120)
        return image

    @staticmethod
    def kvm_usable():
        """KVM only when asked for (RUNNEL_VM_KVM=1): under nested virtualisation
        (this project's CI machines are micro-VMs) a KVM guest can hang before
        its kernel prints a line, while software emulation always boots."""
        return os.environ.get("RUNNEL_VM_KVM") == "1" and os.access("/dev/kvm", os.R_OK | os.W_OK)

    def run(self, job_script, timeout=300):
        self.workdir.mkdir(parents=True, exist_ok=True)
        image = self._initramfs(job_script)
        accel = ["-enable-kvm", "-cpu", "host,-arch-capabilities"] if self.kvm_usable() else ["-cpu", "max"]
        cmd = ["qemu-system-x86_64", *accel, "-m", str(self.memory_mb), "-smp", str(self.cpus),
               "-kernel", str(KERNEL_DIR / "vmlinuz"), "-initrd", str(image),
               "-append", "console=ttyS0 quiet panic=-1 rdinit=/init",
               "-nographic", "-no-reboot", "-nic", "none", "-monitor", "none",
               "-serial", "stdio"]
        log = self.workdir / "console.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        text = log.read_bytes().decode(errors="replace").replace("\r", "")
        text = re.sub(r"\x1b(\[[0-9;?]*[A-Za-z]|c)", "", text)  # the firmware's screen resets
        status = None
        for line in text.splitlines():
            if line.startswith(EXIT_MARK + " "):
                status = int(line.split()[1])
        return status, text
