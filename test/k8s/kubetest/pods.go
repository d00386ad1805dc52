package kubetest

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// FakeNode is the node name CreatePod binds pods to by default. No Node
// object exists: the API server does not check, and a bound pod is what a
// graceful delete leaves in place, terminating, until DeletePod.
const FakeNode = "tandem-fake-node"

// Pod describes a Pod for CreatePod: one container, as a worker pod of the
// chart has.
type Pod struct {
	Namespace, Name string
	Labels          map[string]string
	Annotations     map[string]string
	// Ports are the container's ports; name one "http" for the router's
	// discovery.
	Ports []corev1.ContainerPort
	// Node is the node the pod is bound to; empty: FakeNode.
	Node string
}

// CreatePod creates p, bound to its node, in phase Pending and not Ready.
func (e *Env) CreatePod(ctx context.Context, p Pod) (*corev1.Pod, error) {
	node := p.Node
	if node == "" {
		node = FakeNode
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, Annotations: p.Annotations},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name:  "worker",
				Image: "tandem:test",
				Ports: p.Ports,
			}},
		},
	}
	out, err := e.Client.CoreV1().Pods(p.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return out, nil
}

// SetPodReady writes the pod's status as a kubelet would: phase Running, the
// pod IP ip (e.g. 127.0.0.2, where a local worker process listens), and the
// Ready and ContainersReady conditions set to ready.
func (e *Env) SetPodReady(ctx context.Context, ns, name, ip string, ready bool) (*corev1.Pod, error) {
	var out *corev1.Pod
	err := e.updateStatus(ctx, ns, name, func(pod *corev1.Pod) {
		now := metav1.Now()
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP = ip
		pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		pod.Status.HostIP = ip
		pod.Status.HostIPs = []corev1.HostIP{{IP: ip}}
		if pod.Status.StartTime == nil {
			pod.Status.StartTime = &now
		}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		for _, typ := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			s := st
			if typ == corev1.PodScheduled || typ == corev1.PodInitialized {
				s = corev1.ConditionTrue
			}
			setCondition(pod, typ, s, now)
		}
		cs := make([]corev1.ContainerStatus, 0, len(pod.Spec.Containers))
		for _, c := range pod.Spec.Containers {
			cs = append(cs, corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: ready, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
		}
		pod.Status.ContainerStatuses = cs
	}, &out)
	return out, err
}

func setCondition(pod *corev1.Pod, typ corev1.PodConditionType, st corev1.ConditionStatus, now metav1.Time) {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == typ {
			if c.Status != st {
				c.Status, c.LastTransitionTime = st, now
			}
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: typ, Status: st, LastTransitionTime: now})
}

// updateStatus reads the pod, applies change and writes its status,
// retrying on a conflict.
func (e *Env) updateStatus(ctx context.Context, ns, name string, change func(*corev1.Pod), out **corev1.Pod) error {
	pods := e.Client.CoreV1().Pods(ns)
	for {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get pod %s/%s: %w", ns, name, err)
		}
		change(pod)
		res, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("update the status of pod %s/%s: %w", ns, name, err)
		}
		*out = res
		return nil
	}
}

// TerminatePod deletes the pod with a grace period, as a scale-in or a
// rolling update does: the pod stays, with a deletionTimestamp, until
// DeletePod (no kubelet ends it). It returns the terminating pod.
func (e *Env) TerminatePod(ctx context.Context, ns, name string, grace time.Duration) (*corev1.Pod, error) {
	if grace < time.Second {
		return nil, fmt.Errorf("terminate pod %s/%s: a grace period under 1s deletes at once; use DeletePod", ns, name)
	}
	pods := e.Client.CoreV1().Pods(ns)
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(grace / time.Second))}); err != nil {
		return nil, fmt.Errorf("delete pod %s/%s with a grace period: %w", ns, name, err)
	}
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s after a graceful delete: %w (is it bound to a node?)", ns, name, err)
	}
	if pod.DeletionTimestamp == nil {
		return nil, fmt.Errorf("pod %s/%s has no deletionTimestamp after a graceful delete", ns, name)
	}
	return pod, nil
}

// DeletePod deletes the pod at once (grace period 0, as the kubelet does
// when its containers have stopped) and waits until it is gone.
func (e *Env) DeletePod(ctx context.Context, ns, name string) error {
	pods := e.Client.CoreV1().Pods(ns)
	err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s/%s: %w", ns, name, err)
	}
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
